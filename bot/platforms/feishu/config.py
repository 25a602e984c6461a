"""Feishu/Lark settings read from the environment.

Secrets (app secret, encrypt key, verification token) live only in this object and
are never part of its ``repr``, so an accidental ``log.info(config)`` leaks nothing.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

FEISHU_DOMAIN_URL = "https://open.feishu.cn"
LARK_DOMAIN_URL = "https://open.larksuite.com"
_DOMAIN_ALIASES = {
    "feishu": FEISHU_DOMAIN_URL,
    "lark": LARK_DOMAIN_URL,
    "larksuite": LARK_DOMAIN_URL,
}
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}

Mode = Literal["ws", "http"]


class FeishuConfigError(ValueError):
    """Configuration is missing or invalid; the message names the environment variable."""


@dataclass(frozen=True)
class FeishuConfig:
    """Everything the Feishu platform needs to start; build it with ``from_env``."""

    app_id: str
    app_secret: str = field(repr=False)
    mode: Mode = "ws"
    domain: str = FEISHU_DOMAIN_URL
    encrypt_key: str = field(default="", repr=False)
    verification_token: str = field(default="", repr=False)
    replay_window_seconds: float = 300.0
    """Callbacks older (or further in the future) than this are refused."""
    request_timeout_seconds: float = 10.0
    max_attempts: int = 4
    """API attempts per call (first try + retries) for 429 / 5xx / rate-limit codes."""
    backoff_base_seconds: float = 0.5
    backoff_max_seconds: float = 8.0
    reply_budget_seconds: float = 2.5
    """How long a card callback may wait for the engine before answering (Feishu: 3 s)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> FeishuConfig:
        """Read ``FEISHU_*`` variables; raise ``FeishuConfigError`` naming what is missing."""
        source = os.environ if env is None else env

        def need(name: str) -> str:
            value = source.get(name, "").strip()
            if not value:
                raise FeishuConfigError(f"{name} is not set (required for Feishu)")
            return value

        app_id = need("FEISHU_APP_ID")
        app_secret = need("FEISHU_APP_SECRET")
        raw_mode = source.get("FEISHU_MODE", "ws").strip().lower() or "ws"
        if raw_mode not in ("ws", "http"):
            raise FeishuConfigError(f"FEISHU_MODE must be 'ws' or 'http', not {raw_mode!r}")
        mode: Mode = "http" if raw_mode == "http" else "ws"
        domain = resolve_domain(source.get("FEISHU_DOMAIN", "").strip())
        encrypt_key = source.get("FEISHU_ENCRYPT_KEY", "").strip()
        token = source.get("FEISHU_VERIFICATION_TOKEN", "").strip()
        if mode == "http":
            # Without an encrypt key the SDK checks no signature at all, so HTTP mode
            # insists on both: the key (signature + decryption) and the token.
            encrypt_key = need("FEISHU_ENCRYPT_KEY")
            token = need("FEISHU_VERIFICATION_TOKEN")
        return cls(
            app_id=app_id,
            app_secret=app_secret,
            mode=mode,
            domain=domain,
            encrypt_key=encrypt_key,
            verification_token=token,
        )


def resolve_domain(value: str) -> str:
    """Map ``feishu`` / ``lark`` / an origin URL to the API origin the SDK accepts.

    Only ``https://`` origins are accepted, except ``http://`` on loopback (test fakes),
    mirroring lark-oapi 1.7's own check so the error names our variable, not the SDK.
    """
    if not value:
        return FEISHU_DOMAIN_URL
    alias = _DOMAIN_ALIASES.get(value.lower())
    if alias:
        return alias
    parsed = urllib.parse.urlsplit(value)
    host = parsed.hostname or ""
    if parsed.scheme == "http" and host not in _LOOPBACK_HOSTS:
        raise FeishuConfigError("FEISHU_DOMAIN may use http:// only for a loopback test server")
    if parsed.scheme not in ("http", "https") or not host:
        raise FeishuConfigError(
            "FEISHU_DOMAIN must be 'feishu', 'lark' or an origin like https://open.feishu.cn"
        )
    if parsed.path not in ("", "/") or parsed.query or parsed.fragment or parsed.username:
        raise FeishuConfigError("FEISHU_DOMAIN must be an origin (scheme://host[:port]) only")
    return f"{parsed.scheme}://{parsed.netloc}"


def feishu_wanted(settings: Any, env: Mapping[str, str]) -> bool:
    """Whether ``serve`` should run Feishu: credentials given, or a route needs it.

    Here, not in ``platform``, so ``serve`` can decide before importing lark-oapi.
    """
    if env.get("FEISHU_APP_ID"):
        return True
    return any(route.feishu is not None for route in settings.routes.values())
