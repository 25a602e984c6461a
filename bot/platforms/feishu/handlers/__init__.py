"""Inbound Feishu events, shared by the HTTP callback endpoint and the long connection.

A card click is answered with a toast that tells the truth. The toast is the click's
acknowledgement and Feishu never resends an acknowledged click. After the signature,
decryption and dedupe, the engine's pre-check (``engine.check_click``) refuses what it
knows cheaply (unknown or tampered card, action or option, a closed request, not an
approver by a fresh directory cache, self-approval, a missing required field or
reason): an error toast saying why, in the card's language, audited, nothing stored.
Otherwise the click is stored in the engine's click inbox before any other toast, then
decided inline within 150 ms when a slot is free: the toast says the outcome (success,
a counted vote, or why not), or "received" while the decision is truly still pending.
A clicker whose answer was then not taken (a vote losing a race, a refusal found while
deciding) is told where they clicked, only them (an ephemeral card in the group, else
their chat with the bot), and the card is patched for everyone by the outbox. If the
click could not even be stored, the toast is an error asking to click again. A crash
after the toast loses nothing: the engine's worker decides stored clicks and tells
the clicker; a failed telling is retried by it too.

The HTTP endpoint calls ``answer_click`` on the main loop (no thread, no second
decryption). The long connection's SDK calls ``on_card_action`` and ``on_message``
synchronously on its own thread; they hand work to the main loop with
``run_coroutine_threadsafe``.

Layout (small modules, one concern each; ``dispatch`` wires them):

- ``dispatch``    — ``FeishuEventHandlers``: builds the listeners and the SDK dispatcher.
- ``clicks``      — ``ClickListener``: a click's toast within the reply budget, card
  patches held until it is sent.
- ``admission``   — checks a click passes before anything else (no database).
- ``click_store`` — shared dedupe, the engine's pre-check, the click into the inbox.
- ``decisions``   — deciding stored clicks inline or after the burst; telling the
  clicker what their toast did not.
- ``toasts``      — the toast replies, true when sent.
- ``grant_clicks`` — Revoke clicks on the standing-grants card: revoke, a true toast,
  the list card patched after it.
- ``messages``    — ``im.message.receive_v1``: dedupe, then ``commands`` or ``files``.
- ``commands``    — runs, ``/pending``, ``grants``, ``delegate``, help.
- ``files``       — a file replying to a card, attached to the request.
- ``replies``     — message replies, open_ids turned into names.
- ``dedupe`` / ``audit`` — shared dedupe and refusal audit (also used by ``http``).
- ``loop``        — the main loop, and the work handed to it from SDK threads.

Outside the package, so the transport and ``delegate`` need not import it:
``engine_api`` (what the handlers call), ``reply_context`` (what the HTTP endpoint
tells them) and ``message`` (``Incoming``).
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "FeishuEventHandlers": "bot.platforms.feishu.handlers.dispatch",
    "EngineApi": "bot.platforms.feishu.engine_api",
    "ReplyContext": "bot.platforms.feishu.reply_context",
    "current_reply": "bot.platforms.feishu.reply_context",
    "Incoming": "bot.platforms.feishu.message",
    "message_text": "bot.platforms.feishu.message",
    "file_reference": "bot.platforms.feishu.message",
    "WORKING": "bot.platforms.feishu.handlers.toasts",
    "toast": "bot.platforms.feishu.handlers.toasts",
    "help_text": "bot.platforms.feishu.handlers.commands",
}
"""The names other code imported from the former ``handlers.py``, resolved on first
use (PEP 562) so that importing one module of the package does not import them all."""


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)


__all__ = [
    "WORKING",
    "EngineApi",
    "FeishuEventHandlers",
    "Incoming",
    "ReplyContext",
    "current_reply",
    "file_reference",
    "help_text",
    "message_text",
    "toast",
]
