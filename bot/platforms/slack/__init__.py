"""Slack (slack-bolt ``AsyncApp``): translate Slack payloads into engine calls and back.

Layout (small modules, one concern each):

- ``config``     — ``SlackConfig.from_env`` (SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET,
  SLACK_APP_TOKEN, SLACK_API_URL) and the errors that name a missing variable.
- ``client``     — the ``AsyncWebClient`` with slack-sdk retry handlers (429, 5xx, network).
- ``adapter``    — ``SlackAdapter``: the engine's ``PlatformAdapter`` (deliver/update/result).
- ``directory``  — ``SlackDirectory``: the engine's ``Directory`` (TTL-cached memberships,
  emails, and the install's org for telling Slack Connect guests apart).
- ``identity``   — the person behind a payload (with their team), for the engine.
- ``listeners/`` — one Bolt listener per concern: slash command, mention, buttons, modal.
- ``app``        — ``build_app`` (Bolt wiring, event dedupe) and ``http_endpoint``.
- ``inbound``    — what ``/slack/events`` checks before Bolt parses: signature, shape.
- ``fast_clicks`` — plain card clicks (``ah:`` buttons) past Bolt, through the Bolt
  listener's own store / finish steps; everything else goes to Bolt.
- ``runtime``    — ``SlackPlatform``, everything above for one engine; used by ``serve``.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "SlackAdapter": "adapter", "EVENTS_PATH": "app", "build_app": "app",
    "http_endpoint": "app", "make_client": "client", "retry_handlers": "client",
    "SlackConfig": "config", "SlackConfigError": "config", "SlackDirectory": "directory",
    "SlackPlatform": "runtime", "from_env": "runtime",
}
"""Imported on first use (PEP 562): slack-bolt and slack-sdk load only when Slack runs."""


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)


__all__ = [
    "EVENTS_PATH",
    "SlackAdapter",
    "SlackConfig",
    "SlackConfigError",
    "SlackDirectory",
    "SlackPlatform",
    "build_app",
    "from_env",
    "http_endpoint",
    "make_client",
    "retry_handlers",
]
