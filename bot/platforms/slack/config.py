"""Slack secrets and endpoints, read from the environment and checked up front.

A missing secret must fail at start-up with a message that names the variable and
says where to get it, instead of a 401 at the first click. Tokens never appear in
``repr`` or logs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

BOT_TOKEN_ENV = "SLACK_BOT_TOKEN"
SIGNING_SECRET_ENV = "SLACK_SIGNING_SECRET"
APP_TOKEN_ENV = "SLACK_APP_TOKEN"
API_URL_ENV = "SLACK_API_URL"

_HOW_TO_GET = {
    BOT_TOKEN_ENV: (
        "the Bot User OAuth Token (xoxb-…): api.slack.com/apps → your app → "
        "OAuth & Permissions → Install to Workspace, then copy the token"
    ),
    SIGNING_SECRET_ENV: (
        "the Signing Secret: api.slack.com/apps → your app → Basic Information → "
        "App Credentials → Signing Secret (needed for HTTP mode; or set SLACK_APP_TOKEN "
        "to use Socket Mode instead)"
    ),
    APP_TOKEN_ENV: (
        "an app-level token (xapp-…) with the connections:write scope: "
        "api.slack.com/apps → your app → Basic Information → App-Level Tokens"
    ),
}


class SlackConfigError(RuntimeError):
    """Slack is configured inconsistently; the message says which variable to fix."""


def missing_secret(name: str) -> SlackConfigError:
    """The error for an unset secret, naming it and how to obtain it."""
    return SlackConfigError(f"{name} is not set. Set it to {_HOW_TO_GET[name]}.")


@dataclass(frozen=True)
class SlackConfig:
    """What the Slack platform needs to run. Secrets are hidden from ``repr``."""

    bot_token: str = field(repr=False)
    signing_secret: str | None = field(default=None, repr=False)
    app_token: str | None = field(default=None, repr=False)
    api_url: str | None = None
    """Web API base URL override (tests, Enterprise proxies); None means slack.com."""

    @property
    def socket_mode(self) -> bool:
        """Socket Mode whenever an app-level token is present (no public URL needed)."""
        return bool(self.app_token)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, required: bool = False
    ) -> SlackConfig | None:
        """Read the config; None when no Slack variable is set and Slack is optional."""
        env = os.environ if env is None else env

        def get(name: str) -> str | None:
            value = (env.get(name) or "").strip()
            return value or None

        bot_token = get(BOT_TOKEN_ENV)
        signing_secret = get(SIGNING_SECRET_ENV)
        app_token = get(APP_TOKEN_ENV)
        if not (bot_token or signing_secret or app_token or required):
            return None
        if bot_token is None:
            raise missing_secret(BOT_TOKEN_ENV)
        if not bot_token.startswith("xoxb-"):
            raise SlackConfigError(
                f"{BOT_TOKEN_ENV} does not look like a bot token (expected xoxb-…). "
                f"Use {_HOW_TO_GET[BOT_TOKEN_ENV]}."
            )
        if app_token is not None and not app_token.startswith("xapp-"):
            raise SlackConfigError(
                f"{APP_TOKEN_ENV} does not look like an app-level token (expected xapp-…). "
                f"Use {_HOW_TO_GET[APP_TOKEN_ENV]}."
            )
        if app_token is None and signing_secret is None:
            raise missing_secret(SIGNING_SECRET_ENV)
        api_url = get(API_URL_ENV)
        if api_url is not None and not api_url.endswith("/"):
            api_url += "/"
        return cls(
            bot_token=bot_token,
            signing_secret=signing_secret,
            app_token=app_token,
            api_url=api_url,
        )
