"""A fast path for plain card clicks on ``/slack/events``, in front of Bolt.

Clicks on a card's action buttons (``block_actions`` on an ``ah:`` button: approve,
reject, any action) are most of what ``/slack/events`` receives, and Bolt is costly
for them: it parses the form into a ``BoltRequest``, builds its context (with a new
``AsyncWebClient`` per request), runs its middleware chain (the signature is checked
a second time there), tries its listeners' matchers, and polls every 10 ms until the
listener acks. Here, once ``inbound.check_signature`` has verified the raw bytes, the
form's one ``payload`` field is decoded once and only what the click needs is read
(``ClickFrom``: clicker, message, typed input; the action's id); then the Bolt
listener's own steps run (``ActionListener.store`` before the ack, ``finish`` after
it), so store-before-ack, the ack, the refusals in the clicker's language and the
audit are the same code whichever way a click comes in.

Everything else goes to Bolt unchanged (``read`` returns None): other content types
or form fields, retried deliveries (``X-Slack-Retry-Num``), other payload types, more
or fewer than one action, buttons that are not a plain decision (file, edit, withdraw,
batch, grant buttons: their listeners open modals or do more), ``ah:`` ids that do not
parse (Bolt's listener audits and explains them), org-wide installs
(``is_enterprise_install``), workflow function payloads, payloads of a shape Slack
never sends (Bolt's path answers 400), and every request until Bolt has authorized
the app once (its ``auth.test``, cached by Bolt from then on), so a bad token is
answered by Bolt as before. Socket Mode never comes through here.
"""

from __future__ import annotations

import asyncio
import binascii
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote_plus

from slack_bolt.async_app import AsyncBoltRequest, AsyncRespond
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient
from starlette.responses import Response

from bot.platforms.slack.inbound import wrong_shape
from bot.platforms.slack.listeners.actions import ActionListener, ClickFrom, Stored
from renderers.slack.ids import ACTION_PREFIX

log = logging.getLogger(__name__)

FORM_FIELD = b"payload="
RETRY = "x-slack-retry-num"
ACK_HEADERS = {"content-type": "text/plain;charset=utf-8"}
"""What Bolt's empty ``ack()`` answers with (``BoltResponse`` → Starlette)."""
_TO_QUOTED_PRINTABLE = bytes.maketrans(b"%+", b"= ")


@dataclass(frozen=True)
class FastClick:
    """A verified plain click, read from its payload: the button and what it needs."""

    parsed: tuple[str, str]
    """``(ref, action token)`` from the button's ``action_id``."""
    where: ClickFrom
    response_url: str | None


class FastClicks:
    """Takes plain card clicks past Bolt (``read``, then ``take``)."""

    def __init__(self, listener: ActionListener, client: AsyncWebClient) -> None:
        self._listener = listener
        self._client = client
        self._open = False
        self._tasks: set[asyncio.Task[None]] = set()
        """What runs after the acks (decisions, replies), held until done."""

    def opener(self) -> AsyncMiddleware:
        """Bolt middleware (after Bolt's own authorization) that opens the fast path."""
        return _OpenAfterAuthorization(self)

    def open(self) -> None:
        self._open = True

    def read(self, body: bytes, headers: Mapping[str, str]) -> FastClick | None:
        """The click in a signature-checked ``body``, or None when Bolt should take it."""
        return read_click(body, headers) if self._open else None

    async def take(self, click: FastClick) -> Response:
        """Store the click, answer with Bolt's ack, decide and reply afterwards."""
        stored = await self._listener.store(click.parsed, click.where, path="fast")
        respond = None if click.response_url is None else AsyncRespond(
            response_url=click.response_url, proxy=self._client.proxy, ssl=self._client.ssl)
        task = asyncio.create_task(self._finish(stored, respond))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return Response(b"", status_code=200, headers=ACK_HEADERS)

    async def _finish(self, stored: Stored, respond: AsyncRespond | None) -> None:
        try:
            await self._listener.finish(stored, self._client, respond)
        except Exception:  # what Bolt's listener runner would log
            log.exception("slack click failed after its ack", extra={"platform": "slack"})


def read_click(body: bytes, headers: Mapping[str, str]) -> FastClick | None:
    """The plain click in a signature-checked ``body``, or None if it is anything else
    (see the module's docstring for the list)."""
    if (not body.startswith(FORM_FIELD) or b"&" in body
            or headers.get("content-type") == "application/json" or RETRY in headers):
        return None
    try:  # Bolt's parse_qsl + json.loads, for the one field there is
        payload = json.loads(form_value(body[len(FORM_FIELD):]))
    except (ValueError, RecursionError):
        return None
    if not isinstance(payload, dict):
        return None
    actions = payload.get("actions")
    if (payload.get("type") != "block_actions" or not isinstance(actions, list)
            or len(actions) != 1 or payload.get("is_enterprise_install") not in (None, False)
            or "function_data" in payload or wrong_shape(payload) is not None):
        return None
    action_id = actions[0]["action_id"]  # a str: ``wrong_shape`` checked it
    parsed = ActionListener.parse({"action_id": action_id}) if action_id.startswith(
        ACTION_PREFIX) else None
    if parsed is None:
        return None
    url = payload.get("response_url")
    return FastClick(parsed, ClickFrom.read(payload), url if isinstance(url, str) else None)


def form_value(raw: bytes) -> str:
    """``unquote_plus(raw.decode("utf-8"))``, with its loop in C.

    The payload carries the whole card, a thousand escapes or more, and
    ``unquote_plus`` decodes them one by one in Python (about 200 µs for a small
    card). Quoted-printable is the same code with ``=`` for ``%``, so once ``%``
    became ``=`` (and ``+`` a space) ``binascii.a2b_qp`` decodes it in C. It does so
    exactly like ``unquote_to_bytes`` when the text is ASCII, has no ``=``, CR or LF of
    its own, and every ``%`` starts a valid escape; the last holds exactly when the
    output is two bytes shorter per ``%`` (an invalid ``=`` shortens it by 0, by 1,
    or by 1 for two of them). Anything else takes ``unquote_plus`` itself, so the
    result, including U+FFFD for bad UTF-8 and the error for a body that is not
    UTF-8, is always the same.
    """
    if raw.isascii() and b"=" not in raw and b"\r" not in raw and b"\n" not in raw:
        decoded = binascii.a2b_qp(raw.translate(_TO_QUOTED_PRINTABLE))
        if len(decoded) == len(raw) - 2 * raw.count(b"%"):
            return decoded.decode("utf-8", "replace")
    return unquote_plus(raw.decode("utf-8"))


class _OpenAfterAuthorization(AsyncMiddleware):
    """Opens the fast path once Bolt's single-team authorization passed a request
    with the app's token (Bolt calls ``auth.test`` once and keeps the answer)."""

    def __init__(self, fast: FastClicks) -> None:
        self._fast = fast

    async def async_process(
        self, *, req: AsyncBoltRequest, resp: BoltResponse,
        next: Callable[[], Awaitable[BoltResponse]],
    ) -> BoltResponse | None:
        result = req.context.authorize_result
        if result is not None and (result.bot_token or result.user_token):
            self._fast.open()
        return await next()
