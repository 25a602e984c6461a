"""Slack Web API failures in words people can act on.

``error_code`` (``bot.platforms.slack.client``) gives Slack's short error code; that
stays in the log and the audit. People (chat messages, the agent's ``unavailable``
result) read one of these sentences instead. Unknown codes fall back to a neutral
sentence that points at the logs, never to raw API text.
"""

from __future__ import annotations

BAD_TOKEN = "Slack refused askhuman's token; an admin must check SLACK_BOT_TOKEN."
MISSING_SCOPE = ("askhuman lacks a Slack permission (scope) for that; an admin must add it "
                 "and reinstall the app.")
TOO_LONG = "The message was too long for Slack."
FALLBACK = "Slack refused the message (the bot's logs have the error code)."
UNREACHABLE = "Slack could not be reached."

WORDS: dict[str, str] = {
    "not_in_channel": "askhuman isn't in that channel; invite it with /invite @askhuman.",
    "channel_not_found": "That channel doesn't exist, or askhuman can't see it; an admin "
                         "must check the route's channel and invite the bot.",
    "is_archived": "That channel was archived.",
    "restricted_action": "A workspace setting keeps askhuman from posting there.",
    "user_not_found": "That person isn't in this Slack workspace.",
    "user_disabled": "That person's Slack account is deactivated.",
    "cannot_dm_bot": "askhuman can't send a direct message to a bot.",
    "invalid_auth": BAD_TOKEN,
    "not_authed": BAD_TOKEN,
    "token_revoked": BAD_TOKEN,
    "token_expired": BAD_TOKEN,
    "account_inactive": BAD_TOKEN,
    "missing_scope": MISSING_SCOPE,
    "not_allowed_token_type": MISSING_SCOPE,
    "ratelimited": "Slack is rate limiting askhuman; retrying.",
    "rate_limited": "Slack is rate limiting askhuman; retrying.",
    "msg_too_long": TOO_LONG,
    "msg_blocks_too_long": TOO_LONG,
    "invalid_blocks": "Slack refused the card's layout.",
    "http_429": "Slack is rate limiting askhuman; retrying.",
}
"""Slack error code (``error_code``) → what people read."""

_NETWORK = frozenset({"ClientConnectorError", "ClientConnectionError", "ServerDisconnectedError",
                      "TimeoutError", "ConnectionError", "OSError", "SlackRequestError",
                      "BotUserAccessError", "ConnectionResetError", "ConnectionRefusedError"})


def slack_words(code: str) -> str:
    """What people should read about a failed Slack call, given its ``error_code``."""
    if code in WORDS:
        return WORDS[code]
    if code.startswith("http_5"):
        return "Slack had an internal error."
    if code in _NETWORK:
        return UNREACHABLE
    return FALLBACK
