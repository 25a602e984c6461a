"""The ``/feishu/events`` HTTP callback endpoint (Starlette).

Order of checks, cheapest first, and none of them by the SDK (which logs a traceback
for every request it refuses): body size (``bot.web.BodyLimit``) → signature on the
raw bytes and timestamp window → decrypt and parse, once (``inbound.open_body_text``)
→ verification token → ``url_verification`` answered here → nonce (transport replay
protection; the SDK has none) and event id, recorded together → dispatch without a
second decryption or check: a card click goes to ``answer_click`` on the main loop
(an SDK ``P2CardActionTrigger`` built from the parsed body, ``sdk_objects.trigger``:
the SDK's own classes without its per-call type introspection), anything else to the
SDK dispatcher's ``_do_without_validation`` (what its long connection uses) → reply
(``sdk_objects.encode``: ``JSON.marshal``'s bytes) → release held card patches. No
thread pool is involved. An unsigned request may only be a small
``url_verification`` carrying our token; anything else gets 401.

Where the SDK's dispatcher is bypassed, and why: a card click (2.0
``card.action.trigger``) never reaches ``EventDispatcherHandler.do``. Its checks are
done here first, on the raw bytes, as the SDK does them (signature
``sha256(timestamp + nonce + encrypt_key + body)``, the AES-256-CBC decryption of
``encrypt`` by the SDK's own ``AESCipher``, the verification token), plus what the SDK
lacks (timestamp window, nonce and event id); the click listener then gets the SDK's
own ``P2CardActionTrigger``. The dispatcher would only repeat the decryption and the
parse and then call the same listener. Every other callback (messages, url
verification aside) goes through the SDK dispatcher's handler lookup and model
parsing.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTrigger
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.platforms.feishu import sdk_objects
from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.inbound import (
    URL_VERIFICATION,
    BadBody,
    event_id,
    open_body_text,
    token_matches,
)
from bot.platforms.feishu.replay import ReplayGuard, parse_epoch
from bot.platforms.feishu.reply_context import ReplyContext, current_reply

log = logging.getLogger("askhuman.feishu.http")

TIMESTAMP = "X-Lark-Request-Timestamp"
NONCE = "X-Lark-Request-Nonce"
SIGNATURE = "X-Lark-Signature"
_FORWARDED = (TIMESTAMP, NONCE, SIGNATURE, "X-Request-Id", "Content-Type")
"""Header names exactly as lark-oapi looks them up (its lookup is case-sensitive)."""
_RAW_NAMES = {name.lower().encode("latin-1"): name for name in _FORWARDED}
"""ASGI's header names (lower case bytes) → ``_FORWARDED``'s."""
UNSIGNED_MAX_BYTES = 4096
"""An unsigned body is only opened if it is this small (a url_verification is < 1 KB)."""
CARD_ACTION = "card.action.trigger"
STORE_BEFORE_REPLY = 2.5
"""Seconds from a message's arrival the endpoint may wait for its run start to be
stored before answering (Feishu wants an answer within 3 s)."""
ClickAnswerer = Callable[[P2CardActionTrigger], Awaitable[Any]]


def expected_signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    """Feishu's callback signature: sha256(timestamp + nonce + encrypt_key + body)."""
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def _reject(status: int, reason: str, **extra: Any) -> Response:
    log.warning("feishu callback refused", extra={"reason": reason, **extra})
    return JSONResponse({"msg": "rejected"}, status_code=status)


def make_endpoint(
    dispatcher: Any,
    adapter: FeishuAdapter,
    guard: ReplayGuard,
    encrypt_key: str,
    bind_loop: Callable[[asyncio.AbstractEventLoop], None],
    *,
    verification_token: str,
    answer_click: ClickAnswerer | None = None,
    first_seen: Callable[[str], Awaitable[bool]] | None = None,
    first_seen_chain: Callable[[Sequence[str]], Awaitable[list[bool]]] | None = None,
    audit: Callable[..., Awaitable[None]] | None = None,
) -> Callable[[Request], Awaitable[Response]]:
    """Build the endpoint; ``bind_loop`` tells the handlers which loop is the app's.

    ``verification_token`` is checked here, before the SDK (which would log a traceback
    for a wrong one). ``answer_click(data)`` answers a card click on the loop
    (``ClickListener.answer_click``); without it clicks go to the dispatcher too.
    ``first_seen(key)`` shares nonces with the other replicas (``engine.first_seen``);
    with ``first_seen_chain(keys)`` (``engine.first_seen_chain``) the event id is
    recorded in the same transaction, right after the nonce, and its verdict handed to
    the handlers (``ReplyContext.shared_events``) so they need no second round trip;
    ``audit(ref, who, reason, **details)`` records refusals of *signature-verified*
    requests (a forged signature is only logged, so junk cannot fill the database).
    """

    async def refuse_signed(status: int, reason: str, **extra: Any) -> Response:
        if audit is not None:
            await audit(None, None, f"Feishu callback refused: {reason}.",
                        check=reason.replace(" ", "_"),
                        **{k: str(v)[:200] for k, v in extra.items()})
        return _reject(status, reason, **extra)

    async def admit(
        headers: dict[str, str], body: bytes
    ) -> Response | tuple[dict[str, Any], bytes]:
        """Signature → timestamp → body → token: a refusal, or the opened callback and
        its plaintext."""
        timestamp, nonce = headers.get(TIMESTAMP), headers.get(NONCE)
        signature = headers.get(SIGNATURE)
        signed = timestamp is not None or nonce is not None or signature is not None
        if signed:
            # On the raw bytes, before anything is parsed.
            if timestamp is None or nonce is None or signature is None:
                return _reject(401, "incomplete signature headers")
            wanted = expected_signature(timestamp, nonce, encrypt_key, body)
            if not hmac.compare_digest(wanted, signature):
                return _reject(401, "bad signature")
            sent_at = parse_epoch(timestamp)
            if sent_at is None:
                return await refuse_signed(400, "timestamp is not a number")
            if not guard.fresh(sent_at):
                return await refuse_signed(401, "timestamp outside the replay window",
                                           timestamp=timestamp)
        elif len(body) > UNSIGNED_MAX_BYTES:
            return _reject(401, "missing signature headers")
        try:
            payload, plaintext = open_body_text(body, encrypt_key)
        except BadBody as exc:
            if signed:
                return await refuse_signed(400, str(exc))
            return _reject(401, "missing signature headers")
        if not token_matches(payload, verification_token):
            return _reject(401, "wrong verification token")
        if not signed and payload.get("type") != URL_VERIFICATION:
            return _reject(401, "missing signature headers")
        return payload, plaintext

    async def claim_nonce(
        nonce: str, payload: dict[str, Any], context: ReplyContext
    ) -> Response | None:
        """Remember the nonce (here, then shared) and the event id; None if both new.

        A card click's shared keys are left to the click's own transaction (the click
        inbox write before the toast): one commit per burst instead of two."""
        if not guard.first_nonce(nonce):
            return await refuse_signed(401, "replayed nonce", nonce=nonce)
        if first_seen_chain is not None:
            found = event_id(payload)
            keys = [f"nonce:{nonce}"] + ([f"event:{found}"] if found else [])
            if answer_click is not None and _is_click(payload):
                context.deferred_seen = tuple(keys)
                return None
            verdicts = await first_seen_chain(keys)
            if not verdicts[0]:
                return await refuse_signed(401, "replayed nonce", nonce=nonce)
            if found:
                context.shared_events[found] = all(verdicts)
        elif first_seen is not None and not await first_seen(f"nonce:{nonce}"):
            return await refuse_signed(401, "replayed nonce", nonce=nonce)
        return None

    async def feishu_events(request: Request) -> Response:
        bind_loop(asyncio.get_running_loop())
        body = await request.body()  # at most ``http.max_body_bytes`` (bot.web.BodyLimit)
        context = ReplyContext()
        headers = _forwarded(request)
        admitted = await admit(headers, body)
        if isinstance(admitted, Response):
            return admitted
        payload, plaintext = admitted
        if payload.get("type") == URL_VERIFICATION:
            # Answered here, signed or not (the console's check may come unsigned):
            # the verification token is what shows that it comes from Feishu.
            return _challenge(payload)
        refused = await claim_nonce(headers[NONCE], payload, context)
        if refused is not None:
            return refused
        token = current_reply.set(context)
        try:
            content, problem = await _dispatch(dispatcher, answer_click, payload, plaintext)
        finally:
            current_reply.reset(token)
        await _stored_first(context)
        if context.replayed:  # found when the click's keys were written with it
            await _release(adapter, context.held_refs)
            return await refuse_signed(401, "replayed nonce", nonce=headers[NONCE])
        if content is None:
            await _release(adapter, context.held_refs)
            return await refuse_signed(400, "sdk refused the callback", detail=problem[:200])
        return Response(
            content=content,
            status_code=200,
            media_type="application/json",
            # Starlette runs this after the body has been sent: only then may the
            # engine's parked card patches go out (Feishu rolls back earlier edits).
            background=BackgroundTask(_release, adapter, list(context.held_refs)),
        )

    return feishu_events


def _forwarded(request: Request) -> dict[str, str]:
    """The ``_FORWARDED`` headers, the first of each name, in one pass over the raw
    list (``request.headers[name]`` scans it for every name)."""
    found: dict[str, str] = {}
    for raw, value in request.scope["headers"]:
        name = _RAW_NAMES.get(raw.lower())
        if name is not None and name not in found:
            found[name] = value.decode("latin-1")
    return found


def _is_click(payload: dict[str, Any]) -> bool:
    """A 2.0 card action callback (answered by ``answer_click``, not the SDK)."""
    header = payload.get("header")
    kind = header.get("event_type") if isinstance(header, dict) else None
    return bool(payload.get("schema")) and kind == CARD_ACTION


async def _dispatch(
    dispatcher: Any, answer_click: ClickAnswerer | None, payload: dict[str, Any],
    plaintext: bytes,
) -> tuple[bytes | None, str]:
    """Hand a checked callback to its handler: ``(reply body, "")``, or ``(None, why)``
    when the SDK cannot handle it (an event type nobody registered, say)."""
    header = payload.get("header")
    kind = header.get("event_type") if isinstance(header, dict) else None
    try:
        if answer_click is not None and _is_click(payload):
            reply = await answer_click(sdk_objects.trigger(payload))
        else:
            reply = dispatcher._do_without_validation(plaintext)
    except Exception as exc:
        log.info("feishu callback not handled", extra={"event_type": str(kind)[:64],
                                                       "error": str(exc)[:200]})
        return None, str(exc)
    if reply is None:
        return b'{"msg":"success"}', ""
    return sdk_objects.encode(reply), ""


async def _stored_first(context: ReplyContext) -> None:
    """Answer a message only once the run start it asks for is stored (bounded by the
    reply budget, counted from the request's arrival)."""
    if not context.before_reply:
        return
    left = STORE_BEFORE_REPLY - (time.monotonic() - context.started)
    await asyncio.wait([asyncio.wrap_future(gate) for gate in context.before_reply],
                       timeout=max(left, 0.05))


def _challenge(payload: dict[str, Any]) -> Response:
    """The answer to Feishu's ``url_verification``: its challenge, echoed as JSON."""
    challenge = payload.get("challenge")
    if not isinstance(challenge, str):
        return _reject(400, "url_verification without a challenge")
    return JSONResponse({"challenge": challenge})


async def _release(adapter: FeishuAdapter, refs: list[str]) -> None:
    """Runs after the response is sent: parked card patches may go now."""
    for ref in refs:
        adapter.release(ref)
