"""Feishu API failures in words people can act on.

``FeishuApiError`` carries the code, HTTP status and Feishu's own message; that stays
in the log and the audit. People (chat messages, the agent's ``unavailable`` result)
read one of these sentences instead, never the raw API text. Unknown codes fall back
to a neutral sentence that points at the logs.
"""

from __future__ import annotations

from bot.platforms.feishu.client import RATE_LIMIT_CODES, FeishuApiError

BOT_NOT_IN_CHAT = "askhuman isn't in that chat; an admin must add the bot to it."
CREDENTIALS = ("Feishu refused askhuman's credentials; an admin must check the app id "
               "and secret (FEISHU_APP_ID, FEISHU_APP_SECRET).")
RATE_LIMITED = "Feishu is rate limiting askhuman; retrying."
UNREACHABLE = "Feishu could not be reached."
SERVER_ERROR = "Feishu had an internal error."
FALLBACK = "Feishu refused the message (the bot's logs have the error code)."

WORDS: dict[int, str] = {
    230002: BOT_NOT_IN_CHAT,
    232011: BOT_NOT_IN_CHAT,
    230001: "Feishu rejected the message as invalid (the bot's logs have the details).",
    230006: "askhuman's bot feature is not enabled; an admin must enable it in the "
            "Feishu developer console.",
    230013: "That person can't receive messages from askhuman (outside the app's "
            "availability); an admin must widen the app's availability.",
    230027: "askhuman lacks a Feishu permission for that; an admin must grant it.",
    230099: "Feishu refused the card's content.",
    230110: "That message was deleted.",
    232009: "That chat was disbanded.",
    99991661: CREDENTIALS,
    99991663: CREDENTIALS,
    99991668: CREDENTIALS,
    10003: CREDENTIALS,
    10014: CREDENTIALS,
    **{code: RATE_LIMITED for code in RATE_LIMIT_CODES},
}
"""Feishu error code → what people read (codes from the Open API error list)."""


def feishu_words(exc: BaseException) -> str:
    """What people should read about a failed Feishu call (no raw API text)."""
    if not isinstance(exc, FeishuApiError):
        return FALLBACK
    if exc.code is not None and exc.code in WORDS:
        return WORDS[exc.code]
    if exc.status == 429:
        return RATE_LIMITED
    if exc.status is not None and exc.status >= 500:
        return SERVER_ERROR
    if exc.code is None and exc.status is None:
        return UNREACHABLE  # the call never got an answer (network, DNS, timeout)
    return FALLBACK
