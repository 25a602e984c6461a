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
_TOKEN = re.compile(r"\b(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|[tu]-[A-Za-z0-9_]{20,}"
                    r"|ahk_[A-Za-z0-9_-]{16,}|whsec_[A-Za-z0-9+/=]{16,})")
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
MASK = "***"


def scrub(text: str) -> str:
    """Mask known secrets and token-shaped strings in ``text``."""
    for name in SECRET_ENV_VARS:
        value = os.environ.get(name)
        if value and len(value) >= 6:
            text = text.replace(value, MASK)
    return _TOKEN.sub(MASK, text)


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", ...extra}`` on one line, scrubbed."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                payload[key] = value
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
