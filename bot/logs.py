"""Structured logs: one JSON object per line, with secrets scrubbed before output.

Modules log with stdlib ``logging`` and ``extra={...}`` fields; this formatter puts
those fields into the JSON object. The scrubber masks Slack/Feishu tokens and the
values of the secret environment variables wherever they appear, so a token in an
exception message or a URL never reaches the log.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from typing import Any

SECRET_ENV_VARS = (
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "FEISHU_APP_SECRET",
    "FEISHU_ENCRYPT_KEY",
    "FEISHU_VERIFICATION_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ASKHUMAN_SECRET_KEY",
    "ASKHUMAN_API_KEY",
)
SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_ENCRYPT_KEY", "_APP_KEY")
"""Any other environment variable named like this holds a secret too (GROQ_API_KEY…)."""
_TOKEN = re.compile(
    r"\b(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|[tu]-[A-Za-z0-9_]{20,}"
    # model-provider keys: OpenAI/DeepSeek ``sk-…``, Anthropic ``sk-ant-…``, Google ``AIza…``
    r"|sk-[A-Za-z0-9_-]{12,}|AIza[A-Za-z0-9_-]{30,}"
    # askhuman's own API keys and Standard Webhooks signing secrets
    r"|ahk_[A-Za-z0-9_-]{16,}|whsec_[A-Za-z0-9+/=]{16,})"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+|api[_-]?key[\"']?\s*[=:]\s*[\"']?)[A-Za-z0-9._~+/=-]{12,}")
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^@\s/]+@")
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
RESERVED = ("ts", "level", "logger", "msg", "exc")
"""Keys the formatter itself writes; an extra with one of these names is renamed."""
MASK = "***"


_secrets_seen: tuple[dict[Any, Any], list[str]] | None = None
"""The environment ``_secret_values`` last scanned, and what it found there."""


def _secret_values() -> list[str]:
    """Values of the secret environment variables, longest first (so no partial masks).

    Every stored audit row and error is scrubbed, so this runs several times per
    decision: the scan is redone only when the environment changed since the last one
    (one C-level dict comparison instead of decoding every variable)."""
    global _secrets_seen
    data = getattr(os.environ, "_data", None)  # CPython's raw mapping behind os.environ
    seen = _secrets_seen
    if seen is not None and data is not None and seen[0] == data:
        return seen[1]
    values = _scan_secret_values()
    if isinstance(data, dict):
        _secrets_seen = (dict(data), values)
    return values


def _scan_secret_values() -> list[str]:
    found = set()
    for name, value in os.environ.items():
        named = name in SECRET_ENV_VARS or name.upper().endswith(SECRET_ENV_SUFFIXES)
        if named and value and len(value) >= 6:
            found.add(value)
    return sorted(found, key=len, reverse=True)


def scrub(text: str) -> str:
    """Mask known secrets and token-shaped strings in ``text``.

    Masks the values of secret environment variables, Slack/Feishu tokens, model
    provider keys (``sk-…``), ``Bearer …`` / ``api_key=…`` values and the password
    in ``scheme://user:password@host`` URLs. The same function guards logs, chat
    messages and everything the engine stores (``scrub_json``).
    """
    for value in _secret_values():
        text = text.replace(value, MASK)
    text = _TOKEN.sub(MASK, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{MASK}", text)
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}@", text)


def scrub_json(value: Any) -> Any:
    """``scrub`` every string (keys too) inside a JSON-like value, e.g. audit details."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(str(k)): scrub_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_json(v) for v in value]
    return value


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", ...extra}`` on one line, scrubbed.

    An extra named like one of the line's own keys (``RESERVED``) is written as
    ``extra_<key>``: a field must never replace the line's time, level or message.
    """

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                payload[f"extra_{key}" if key in RESERVED else key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return scrub(json.dumps(payload, default=str, ensure_ascii=False))


def configure_logging(level: str = "INFO", json_lines: bool = True) -> None:
    """Install the formatter on the root logger (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
