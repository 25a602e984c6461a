"""The ``/feishu/events`` HTTP callback endpoint (Starlette).

Order of checks: body size → signature, timestamp window and nonce (transport
replay protection; done here because the SDK has none) → the SDK dispatcher, which
decrypts, checks the verification token and signature again, answers
``url_verification`` and calls our handlers → reply → release held card patches.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import hashlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from lark_oapi.core.model import RawRequest
from lark_oapi.core.utils import AESCipher
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.handlers import ReplyContext, current_reply
from bot.platforms.feishu.replay import ReplayGuard, parse_epoch

log = logging.getLogger("askhuman.feishu.http")

TIMESTAMP = "X-Lark-Request-Timestamp"
NONCE = "X-Lark-Request-Nonce"
SIGNATURE = "X-Lark-Signature"
_FORWARDED = (TIMESTAMP, NONCE, SIGNATURE, "X-Request-Id", "Content-Type")
"""Header names exactly as lark-oapi looks them up (its lookup is case-sensitive)."""
MAX_BODY_BYTES = 1024 * 1024


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
    executor: concurrent.futures.Executor,
    *,
    first_seen: Callable[[str], Awaitable[bool]] | None = None,
    first_seen_chain: Callable[[Sequence[str]], Awaitable[list[bool]]] | None = None,
    audit: Callable[..., Awaitable[None]] | None = None,
) -> Callable[[Request], Awaitable[Response]]:
    """Build the endpoint; ``bind_loop`` tells the handlers which loop is the app's.

    ``executor`` runs the (blocking) SDK dispatcher. It must not be the loop's default
    executor: a handler waits there for the engine, which itself needs that pool.
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

    async def feishu_events(request: Request) -> Response:
        bind_loop(asyncio.get_running_loop())
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return _reject(413, "body too large", size=len(body))
        context = ReplyContext()
        headers = {name: request.headers[name] for name in _FORWARDED if name in request.headers}
        timestamp, nonce = headers.get(TIMESTAMP), headers.get(NONCE)
        signature = headers.get(SIGNATURE)
        if timestamp is not None or nonce is not None or signature is not None:
            # Signed request (everything except, possibly, the console's url_verification):
            # check it ourselves first so the nonce is only remembered for genuine requests.
            if timestamp is None or nonce is None or signature is None:
                return _reject(401, "incomplete signature headers")
            wanted = expected_signature(timestamp, nonce, encrypt_key, body)
            if not hmac.compare_digest(wanted, signature):
                return _reject(401, "bad signature")
            sent_at = parse_epoch(timestamp)
            if sent_at is None or not guard.fresh(sent_at):
                return await refuse_signed(401, "timestamp outside the replay window",
                                           timestamp=timestamp)
            if not guard.first_nonce(nonce):
                return await refuse_signed(401, "replayed nonce", nonce=nonce)
            if first_seen_chain is not None:
                event_id = _event_id(body, encrypt_key)
                keys = [f"nonce:{nonce}"] + ([f"event:{event_id}"] if event_id else [])
                verdicts = await first_seen_chain(keys)
                if not verdicts[0]:
                    return await refuse_signed(401, "replayed nonce", nonce=nonce)
                if event_id:
                    context.shared_events[event_id] = all(verdicts)
            elif first_seen is not None and not await first_seen(f"nonce:{nonce}"):
                return await refuse_signed(401, "replayed nonce", nonce=nonce)
        raw = RawRequest()
        raw.uri = request.url.path
        raw.headers = headers
        raw.body = body
        token = current_reply.set(context)
        try:
            # Run in a copy of this context, so the handlers see ``context``.
            call_context = contextvars.copy_context()
            result = await asyncio.get_running_loop().run_in_executor(
                executor, call_context.run, dispatcher.do, raw
            )
        finally:
            current_reply.reset(token)
        if result.status_code != 200:
            await _release(adapter, context.held_refs)
            detail = (result.content or b"")[:200].decode("utf-8", "replace")
            if signature is not None:  # verified above: audit; unsigned junk is only logged
                return await refuse_signed(400, "sdk refused the callback", detail=detail)
            return _reject(400, "sdk refused the callback", detail=detail)
        return Response(
            content=result.content or b"{}",
            status_code=200,
            media_type="application/json",
            # Starlette runs this after the body has been sent: only then may the
            # engine's parked card patches go out (Feishu rolls back earlier edits).
            background=BackgroundTask(_release, adapter, list(context.held_refs)),
        )

    return feishu_events


def _event_id(body: bytes, encrypt_key: str) -> str | None:
    """The event id of a signature-checked body (decrypted as the SDK will), or None if
    it has none or cannot be read (the SDK then decides; its handlers dedupe it)."""
    try:
        outer = json.loads(body)
        encrypted = outer.get("encrypt") if isinstance(outer, dict) else None
        if isinstance(encrypted, str) and encrypted:
            if not encrypt_key:
                return None
            event = json.loads(AESCipher(encrypt_key).decrypt_str(encrypted))
        else:
            event = outer
        header = event.get("header") if isinstance(event, dict) else None
        event_id = header.get("event_id") if isinstance(header, dict) else None
    except Exception:
        return None
    return event_id if isinstance(event_id, str) and event_id else None


async def _release(adapter: FeishuAdapter, refs: list[str]) -> None:
    """Runs after the response is sent: parked card patches may go now."""
    for ref in refs:
        adapter.release(ref)
