"""A thin, retrying wrapper over the lark-oapi client for the few calls askhuman makes.

Why a wrapper: the SDK returns error objects instead of raising, does not retry, and
its async methods still fetch the tenant token with blocking ``requests``. We call the
synchronous SDK methods in a worker thread (never blocking the event loop), classify
failures (HTTP 429 / 5xx and Feishu rate-limit codes are retried with exponential
backoff and jitter) and raise ``FeishuApiError`` for everything else.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import json
import logging
import random
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import lark_oapi as lark
import requests
import requests.adapters
from lark_oapi.api.contact.v3 import (
    BatchGetIdUserRequest,
    BatchGetIdUserRequestBody,
    GetUserRequest,
)
from lark_oapi.api.im.v1 import (
    CreateMessageRequest,
    CreateMessageRequestBody,
    GetChatMembersRequest,
    GetMessageResourceRequest,
    PatchMessageRequest,
    PatchMessageRequestBody,
    ReplyMessageRequest,
    ReplyMessageRequestBody,
)
from lark_oapi.core.enum import AccessTokenType, HttpMethod
from lark_oapi.core.model import BaseRequest
from lark_oapi.core.token.manager import TokenManager

from bot import metrics
from bot.platforms.feishu.config import FeishuConfig

log = logging.getLogger("askhuman.feishu.api")

RATE_LIMIT_CODES = frozenset({99991400, 230020, 11232, 11233})
"""Feishu "too many requests" codes (app-wide, per-chat message and send-rate limits)."""
TOKEN_INVALID_CODES = frozenset({99991661, 99991663, 99991668})
"""The cached tenant token is missing/expired: drop it and retry once with a fresh one."""
SERVER_ERROR_CODES = frozenset({1000004, 1000005, 99991672})
"""Transient internal errors reported with HTTP 200/400 bodies."""

T = TypeVar("T")


@dataclass
class FeishuApiError(Exception):
    """An API call failed for good (or was not retryable)."""

    operation: str
    code: int | None
    msg: str
    status: int | None = None
    retryable: bool = False
    log_id: str | None = None

    def __str__(self) -> str:
        return (
            f"feishu {self.operation} failed: code={self.code} status={self.status} "
            f"msg={self.msg} log_id={self.log_id}"
        )


@dataclass
class _Outcome:
    response: Any = None
    error: FeishuApiError | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class SentMessage:
    message_id: str
    chat_id: str


@dataclass(frozen=True)
class Resource:
    content: bytes
    file_name: str | None


class _PooledRequests:
    """Stands in for the ``requests`` module inside lark-oapi's transport.

    lark-oapi sends every call with the module-level ``requests.request``, which opens
    a new connection (a TCP and TLS handshake) each time. This routes those calls
    through one ``requests.Session`` whose connection pool is shared by the threads the
    calls run on; everything else falls through to the real module.
    """

    def __init__(self, pool_size: int = 32) -> None:
        self.session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_connections=8, pool_maxsize=pool_size)
        self.session.mount("https://", adapter)
        self.session.mount("http://", adapter)

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, url, **kwargs)

    def close(self) -> None:
        """Close the pooled connections (a later call opens new ones)."""
        self.session.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(requests, name)


def close_lark_connections() -> None:
    """Close the pooled connections lark-oapi's calls share (shutdown)."""
    from lark_oapi.core.http import transport

    if isinstance(transport.requests, _PooledRequests):
        transport.requests.close()


def pool_lark_connections() -> None:
    """Make lark-oapi reuse HTTP connections (idempotent; see ``_PooledRequests``)."""
    from lark_oapi.core.http import transport

    if not isinstance(transport.requests, _PooledRequests):
        transport.requests = _PooledRequests()


CALL_THREADS = 16
"""Concurrent blocking lark-oapi calls per process (the HTTP pool holds 32)."""


class FeishuApi:
    """Async, retrying access to the Feishu Open API (messages, contacts, chats)."""

    def __init__(self, config: FeishuConfig, *, sleep: Callable[[float], Any] | None = None):
        pool_lark_connections()
        self._config = config
        self._sleep = sleep or asyncio.sleep
        # lark-oapi blocks (``requests``): its calls get threads of their own, so a burst
        # of card patches or private messages never queues the database's calls, which
        # use the loop's default pool (the click path waits for those).
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=CALL_THREADS, thread_name_prefix="feishu-api")
        self.client: Any = (
            lark.Client.builder()
            .app_id(config.app_id)
            .app_secret(config.app_secret)
            .domain(config.domain)
            .timeout(config.request_timeout_seconds)
            .log_level(lark.LogLevel.WARNING)
            .build()
        )

    async def aclose(self) -> None:
        """At shutdown: wait for the calls still running (each is bounded by the request
        timeout), then close the pooled HTTP connections they used."""
        await asyncio.to_thread(self._threads.shutdown, wait=True, cancel_futures=True)
        await asyncio.to_thread(close_lark_connections)

    # -- messages ---------------------------------------------------------------------

    async def send_message(
        self, receive_id_type: str, receive_id: str, msg_type: str, content: str, uuid: str
    ) -> SentMessage:
        """``im.v1.message.create``; ``uuid`` makes a retried send a no-op on Feishu's side."""
        body = (
            CreateMessageRequestBody.builder()
            .receive_id(receive_id)
            .msg_type(msg_type)
            .content(content)
            .uuid(uuid)
            .build()
        )
        req = (
            CreateMessageRequest.builder().receive_id_type(receive_id_type).request_body(body).build()
        )
        resp = await self._call("message.create", self.client.im.v1.message.create, req)
        return SentMessage(message_id=resp.data.message_id, chat_id=resp.data.chat_id or "")

    async def reply_message(
        self, message_id: str, msg_type: str, content: str, uuid: str | None = None
    ) -> str:
        """``im.v1.message.reply``: answer in the thread of ``message_id``."""
        builder = ReplyMessageRequestBody.builder().msg_type(msg_type).content(content)
        if uuid:
            builder = builder.uuid(uuid)
        req = (
            ReplyMessageRequest.builder()
            .message_id(message_id)
            .request_body(builder.build())
            .build()
        )
        resp = await self._call("message.reply", self.client.im.v1.message.reply, req)
        return str(resp.data.message_id)

    async def patch_message(self, message_id: str, content: str) -> None:
        """``im.v1.message.patch``: replace a shared card for everyone who sees it."""
        req = (
            PatchMessageRequest.builder()
            .message_id(message_id)
            .request_body(PatchMessageRequestBody.builder().content(content).build())
            .build()
        )
        await self._call("message.patch", self.client.im.v1.message.patch, req)

    async def send_ephemeral(self, chat_id: str, open_id: str, card: dict[str, Any]) -> None:
        """``POST /open-apis/ephemeral/v1/send``: a card in a group chat that only
        ``open_id`` sees. lark-oapi has no typed call for it, so the request goes raw
        through its client (tenant token, transport, retries as for every call). Feishu
        refuses it outside ordinary group chats (p2p, topic groups)."""
        req = (
            BaseRequest.builder()
            .http_method(HttpMethod.POST)
            .uri("/open-apis/ephemeral/v1/send")
            .token_types({AccessTokenType.TENANT})
            .body({"chat_id": chat_id, "open_id": open_id, "msg_type": "interactive",
                   "card": card})
            .build()
        )
        await self._call("ephemeral.send", self.client.request, req)

    async def get_resource(self, message_id: str, file_key: str, kind: str) -> Resource:
        """Download a file or image that a person sent (``im.v1.message_resource.get``)."""
        req = (
            GetMessageResourceRequest.builder()
            .message_id(message_id)
            .file_key(file_key)
            .type(kind)
            .build()
        )
        resp = await self._call(
            "message_resource.get", self.client.im.v1.message_resource.get, req
        )
        name = resp.file_name or _disposition_name(getattr(resp.raw, "headers", None) or {})
        return Resource(content=resp.file.read(), file_name=name)

    # -- directory --------------------------------------------------------------------

    async def batch_get_open_ids(
        self, emails: list[str], mobiles: list[str]
    ) -> dict[str, str]:
        """Map emails / mobiles to open_ids (≤ 50 per call, so we chunk)."""
        found: dict[str, str] = {}
        for kind, items in (("emails", emails), ("mobiles", mobiles)):
            for start in range(0, len(items), 50):
                chunk = items[start : start + 50]
                body = BatchGetIdUserRequestBody.builder().include_resigned(False)
                body = body.emails(chunk) if kind == "emails" else body.mobiles(chunk)
                req = (
                    BatchGetIdUserRequest.builder()
                    .user_id_type("open_id")
                    .request_body(body.build())
                    .build()
                )
                resp = await self._call(
                    "user.batch_get_id", self.client.contact.v3.user.batch_get_id, req
                )
                for info in resp.data.user_list or []:
                    key = info.email if kind == "emails" else info.mobile
                    if key and info.user_id:
                        found[key.lower() if kind == "emails" else key] = info.user_id
        return found

    async def user_name(self, open_id: str) -> str | None:
        """A person's name (``contact.v3.user.get``; needs ``contact:user.base:readonly``
        and the person inside the app's contact range). None when Feishu has no name."""
        req = GetUserRequest.builder().user_id(open_id).user_id_type("open_id").build()
        resp = await self._call("user.get", self.client.contact.v3.user.get, req)
        user = getattr(resp.data, "user", None) if resp.data is not None else None
        name = getattr(user, "name", None) or getattr(user, "en_name", None)
        return str(name) if name else None

    async def chat_member_open_ids(self, chat_id: str) -> set[str]:
        """All human members of a chat (bots are never listed), following pagination."""
        members: set[str] = set()
        page_token: str | None = None
        for _ in range(1000):  # hard stop against a server that never ends pagination
            builder = (
                GetChatMembersRequest.builder()
                .chat_id(chat_id)
                .member_id_type("open_id")
                .page_size(100)
            )
            if page_token:
                builder = builder.page_token(page_token)
            resp = await self._call(
                "chat_members.get", self.client.im.v1.chat_members.get, builder.build()
            )
            members.update(m.member_id for m in resp.data.items or [] if m.member_id)
            page_token = resp.data.page_token
            if not resp.data.has_more or not page_token:
                break
        return members

    # -- retry core -------------------------------------------------------------------

    async def _call(self, operation: str, method: Callable[[Any], T], request: Any) -> T:
        attempts = max(1, self._config.max_attempts)
        token_refreshed = False
        attempt = 0
        while True:
            attempt += 1
            outcome = await self._attempt(operation, method, request)
            if outcome.error is None:
                metrics.platform_call("feishu", operation, "ok")
                return outcome.response  # type: ignore[no-any-return]
            error, retry_after = outcome.error, outcome.retry_after
            metrics.platform_call("feishu", operation, str(error.status or error.code or
                                                           "error"))
            if error.code in TOKEN_INVALID_CODES and not token_refreshed:
                token_refreshed = True
                self._drop_cached_token()
                error.retryable = True
                retry_after = 0.0
            if not error.retryable or attempt >= attempts:
                log.warning(
                    "feishu api call failed",
                    extra={
                        "operation": operation,
                        "code": error.code,
                        "status": error.status,
                        "log_id": error.log_id,
                        "attempts": attempt,
                    },
                )
                raise error
            delay = self._backoff(attempt, retry_after)
            metrics.platform_retry("feishu", operation)
            log.info(
                "feishu api call retried",
                extra={
                    "operation": operation,
                    "code": error.code,
                    "status": error.status,
                    "attempt": attempt,
                    "delay_s": round(delay, 3),
                },
            )
            await self._sleep(delay)

    async def _attempt(
        self, operation: str, method: Callable[[Any], Any], request: Any
    ) -> _Outcome:
        """One call, classified: a response, or an error with an optional server delay."""
        try:
            call = functools.partial(contextvars.copy_context().run, method, request)
            resp = await asyncio.get_running_loop().run_in_executor(self._threads, call)
        except Exception as exc:  # network errors, non-JSON error pages, token fetch errors
            code = getattr(exc, "code", None)
            return _Outcome(
                error=FeishuApiError(
                    operation,
                    code if isinstance(code, int) else None,
                    f"{type(exc).__name__}: {exc}"[:300],
                    retryable=True,
                )
            )
        raw = getattr(resp, "raw", None)
        status = getattr(raw, "status_code", None)
        if resp.success() and (status is None or status < 400):
            return _Outcome(response=resp)
        code = resp.code
        retryable = (
            status == 429
            or (status is not None and status >= 500)
            or code in RATE_LIMIT_CODES
            or code in SERVER_ERROR_CODES
        )
        headers = getattr(raw, "headers", None) or {}
        return _Outcome(
            error=FeishuApiError(
                operation,
                code,
                str(resp.msg or "")[:300],
                status=status,
                retryable=retryable,
                log_id=_log_id(resp),
            ),
            retry_after=_retry_after(headers),
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        base = self._config.backoff_base_seconds * (2 ** (attempt - 1))
        delay: float = min(self._config.backoff_max_seconds, base) * random.uniform(0.8, 1.2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self._config.backoff_max_seconds))
        return delay

    def _drop_cached_token(self) -> None:
        TokenManager.cache.set(f"self_tenant_token:{self._config.app_id}", "", 0)


def _log_id(resp: Any) -> str | None:
    try:
        value = resp.get_log_id()
    except Exception:
        return None
    return str(value) if value else None


def _retry_after(headers: dict[str, Any]) -> float | None:
    """Honor ``Retry-After`` or Feishu's ``x-ogw-ratelimit-reset`` (seconds) if present."""
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in ("retry-after", "x-ogw-ratelimit-reset"):
        value = lowered.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            continue
    return None


def _disposition_name(headers: dict[str, Any]) -> str | None:
    """``filename`` from Content-Disposition; the SDK's own lookup is case-sensitive."""
    lowered = {k.lower(): v for k, v in headers.items()}
    value = str(lowered.get("content-disposition") or "")
    for part in value.split(";"):
        key, _, raw = part.strip().partition("=")
        if key.lower() == "filename" and raw:
            return urllib.parse.unquote(raw.strip().strip('"')) or None
    return None


def dumps(value: Any) -> str:
    """JSON for message ``content`` (one ``json.dumps``; keep non-ASCII compact)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
