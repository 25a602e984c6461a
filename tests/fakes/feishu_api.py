"""A fake Feishu/Lark Open API for tests, served on 127.0.0.1 (see ``asgi_server``).

It speaks just enough of the real API for lark-oapi: tenant token, message create /
reply / patch, ephemeral cards (``ephemeral/v1/send``, group chats only, recorded in
``ephemerals``), contact ``batch_get_id`` and ``user.get``, chat members (paginated)
and message resources. It records every call, can inject failures (HTTP 429/5xx or Feishu error
codes) for the next N calls of an endpoint, rejects cards that are not schema 2.0
JSON within 30 KB, and dedupes message sends and replies by ``uuid`` like Feishu does:
a repeat within ``uuid_window`` seconds (1 h) returns the first message and posts nothing.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

TOKEN = "t-fake-tenant-token"
MAX_CARD_BYTES = 30 * 1024
UUID_WINDOW_SECONDS = 3600.0
"""Feishu dedupes a ``uuid`` for about one hour."""
ENDPOINTS = (
    "token",
    "message.create",
    "message.reply",
    "message.patch",
    "user.batch_get_id",
    "user.get",
    "chat_members.get",
    "message_resource.get",
    "ephemeral.send",
)


@dataclass
class Call:
    """One request the fake received (after auth), with what it answered."""

    endpoint: str
    method: str
    path: str
    query: dict[str, str]
    body: Any
    at: float
    """``time.monotonic()`` when the request arrived."""
    status: int = 200
    code: int = 0
    peer: object = None
    """The client's (host, port): calls over one kept-alive connection share it."""


@dataclass
class Failure:
    times: int
    status: int
    code: int
    raw_body: str | None = None


@dataclass
class Message:
    message_id: str
    chat_id: str
    msg_type: str
    content: str
    parent_id: str | None = None
    uuid: str | None = None
    receive_id: str | None = None
    receive_id_type: str | None = None
    patches: list[str] = field(default_factory=list)
    """Every patched content, oldest first (``content`` is always the current one)."""

    def card(self, original: bool = False) -> dict[str, Any]:
        """The card as currently shown, or as first sent."""
        data: dict[str, Any] = json.loads(self.sent_content if original else self.content)
        return data

    @property
    def sent_content(self) -> str:
        return self._sent if self._sent is not None else self.content

    def __post_init__(self) -> None:
        self._sent: str | None = self.content


@dataclass
class Ephemeral:
    """A card only ``open_id`` sees in ``chat_id`` (``ephemeral/v1/send``)."""

    chat_id: str
    open_id: str
    card: dict[str, Any]

    @property
    def text(self) -> str:
        """The card's plain text, paragraphs joined by newlines."""
        return "\n".join(str(e.get("text", {}).get("content", ""))
                         for e in self.card.get("elements", []) if isinstance(e, dict))


class FakeFeishuApi:
    """State and ASGI app of the fake; thread-safe (uvicorn runs it in another thread)."""

    def __init__(
        self,
        app_id: str = "cli_test_app",
        app_secret: str = "test-secret",
        users: dict[str, str] | None = None,
        chats: dict[str, list[str]] | None = None,
        names: dict[str, str] | None = None,
    ) -> None:
        self.app_id = app_id
        self.app_secret = app_secret
        self.users = {k.lower(): v for k, v in (users or {}).items()}
        """email or mobile -> open_id"""
        self.chats = {k: list(v) for k, v in (chats or {}).items()}
        """chat_id -> member open_ids (the bot is in every listed chat)."""
        self.names = dict(names or {})
        """open_id -> name for ``contact.v3.user.get`` (others: outside the contact range)."""
        self.calls: list[Call] = []
        self.messages: dict[str, Message] = {}
        self.resources: dict[tuple[str, str], tuple[bytes, str]] = {}
        self.ephemerals: list[Ephemeral] = []
        self.deduped_sends = 0
        self.uuid_window = UUID_WINDOW_SECONDS
        self.clock = time.monotonic
        """Time source of the uuid window (tests may move it on)."""
        self._by_uuid: dict[str, tuple[str, float]] = {}
        self._failures: dict[str, list[Failure]] = defaultdict(list)
        self._hangs: dict[str, list[float]] = defaultdict(list)
        self._lock = threading.Lock()
        self._counter = 0
        self.app = Starlette(routes=self._routes())

    # -- test controls ------------------------------------------------------------------

    def fail_next(
        self,
        endpoint: str,
        times: int = 1,
        *,
        status: int = 500,
        code: int | None = None,
        raw_body: str | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``endpoint`` with an error.

        ``status=429`` defaults to Feishu's rate-limit code 99991400; ``code`` alone
        (with ``status=200`` or 400) simulates a Feishu business error.
        """
        if endpoint not in ENDPOINTS:
            raise ValueError(f"unknown endpoint {endpoint!r}; one of {ENDPOINTS}")
        default = 99991400 if status == 429 else (1000004 if status >= 500 else 230099)
        with self._lock:
            self._failures[endpoint].append(Failure(times, status, code or default, raw_body))

    def hang_after_accept(self, endpoint: str, seconds: float, times: int = 1) -> None:
        """The next ``times`` successful calls of ``endpoint`` (message.create or
        message.reply) take effect but answer only after ``seconds``: the caller times
        out (or dies) without learning that its message was posted."""
        with self._lock:
            self._hangs[endpoint].extend([seconds] * times)

    async def _maybe_hang(self, endpoint: str) -> None:
        with self._lock:
            queue = self._hangs.get(endpoint) or []
            seconds = queue.pop(0) if queue else None
        if seconds is not None:
            await asyncio.sleep(seconds)

    def add_resource(self, message_id: str, file_key: str, content: bytes, name: str) -> None:
        with self._lock:
            self.resources[(message_id, file_key)] = (content, name)

    def calls_to(self, endpoint: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.endpoint == endpoint]

    def successful(self, endpoint: str) -> list[Call]:
        return [c for c in self.calls_to(endpoint) if c.status == 200 and c.code == 0]

    def wait_for(self, endpoint: str, count: int = 1, timeout: float = 10.0) -> list[Call]:
        """Poll until ``count`` successful calls of ``endpoint`` arrived (sync helper)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.successful(endpoint)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(
            f"expected {count} successful {endpoint} call(s), got {self.successful(endpoint)}"
        )

    # -- plumbing -------------------------------------------------------------------------

    def _routes(self) -> list[Route]:
        return [
            Route("/open-apis/auth/v3/tenant_access_token/internal", self._token, methods=["POST"]),
            Route("/open-apis/im/v1/messages", self._create, methods=["POST"]),
            Route("/open-apis/im/v1/messages/{mid}/reply", self._reply, methods=["POST"]),
            Route("/open-apis/im/v1/messages/{mid}", self._patch, methods=["PATCH"]),
            Route(
                "/open-apis/contact/v3/users/batch_get_id", self._batch_get_id, methods=["POST"]
            ),
            Route("/open-apis/contact/v3/users/{uid}", self._user, methods=["GET"]),
            Route("/open-apis/im/v1/chats/{cid}/members", self._members, methods=["GET"]),
            Route(
                "/open-apis/im/v1/messages/{mid}/resources/{key}", self._resource, methods=["GET"]
            ),
            Route("/open-apis/ephemeral/v1/send", self._ephemeral, methods=["POST"]),
        ]

    async def _begin(
        self, endpoint: str, request: Request, auth: bool = True
    ) -> tuple[Call, Response | None]:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        call = Call(
            endpoint=endpoint,
            method=request.method,
            path=request.url.path,
            query=dict(request.query_params),
            body=body,
            at=time.monotonic(),
            peer=tuple(request.client) if request.client else None,
        )
        with self._lock:
            self.calls.append(call)
            queue = self._failures.get(endpoint) or []
            failure = queue[0] if queue else None
            if failure is not None:
                failure.times -= 1
                if failure.times <= 0:
                    queue.pop(0)
        if failure is not None:
            call.status, call.code = failure.status, failure.code
            if failure.raw_body is not None:
                return call, PlainTextResponse(failure.raw_body, status_code=failure.status)
            return call, self._error(call, failure.code, "injected failure", failure.status)
        if auth and request.headers.get("authorization") != f"Bearer {TOKEN}":
            return call, self._error(call, 99991663, "Invalid access token for authorization", 400)
        return call, None

    @staticmethod
    def _error(call: Call, code: int, msg: str, status: int = 400) -> Response:
        call.status, call.code = status, code
        return JSONResponse({"code": code, "msg": msg}, status_code=status)

    @staticmethod
    def _ok(data: dict[str, Any]) -> Response:
        return JSONResponse({"code": 0, "msg": "success", "data": data})

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}{self._counter:08x}"

    @staticmethod
    def _check_card(content: object) -> str | None:
        """Why a card would be refused by Feishu, or None if it is acceptable."""
        if not isinstance(content, str):
            return "content must be a JSON string"
        if len(content.encode("utf-8")) > MAX_CARD_BYTES:
            return "card content exceeds 30 KB"
        try:
            card = json.loads(content)
        except ValueError:
            return "card content is not JSON"
        if not isinstance(card, dict) or card.get("schema") != "2.0":
            return "card must be schema 2.0"
        if not isinstance(card.get("body"), dict) or not isinstance(
            card["body"].get("elements"), list
        ):
            return "card 2.0 needs body.elements"
        if (card.get("config") or {}).get("update_multi") is not True:
            return "shared cards need config.update_multi = true"
        return None

    def _message_payload(self, message: Message) -> dict[str, Any]:
        return {
            "message_id": message.message_id,
            "chat_id": message.chat_id,
            "msg_type": message.msg_type,
            "parent_id": message.parent_id or "",
            "body": {"content": message.content},
        }

    # -- endpoints ------------------------------------------------------------------------

    async def _token(self, request: Request) -> Response:
        call, failed = await self._begin("token", request, auth=False)
        if failed:
            return failed
        body = call.body or {}
        if body.get("app_id") != self.app_id or body.get("app_secret") != self.app_secret:
            return self._error(call, 10014, "app secret invalid")
        return JSONResponse(
            {"code": 0, "msg": "ok", "tenant_access_token": TOKEN, "expire": 7200}
        )

    async def _create(self, request: Request) -> Response:
        call, failed = await self._begin("message.create", request)
        if failed:
            return failed
        body = call.body or {}
        id_type = call.query.get("receive_id_type", "")
        receive_id = str(body.get("receive_id", ""))
        msg_type, content = body.get("msg_type"), body.get("content")
        if msg_type == "interactive" and (problem := self._check_card(content)):
            return self._error(call, 230099, problem)
        uuid = body.get("uuid")
        if (known := self._deduped(uuid)) is not None:
            return self._ok(self._message_payload(known))
        if id_type == "chat_id":
            if receive_id not in self.chats:
                return self._error(call, 230002, "Bot/User can NOT be out of the chat.")
            chat_id = receive_id
        elif id_type in ("open_id", "email", "user_id", "union_id"):
            open_id = self.users.get(receive_id.lower()) if id_type == "email" else receive_id
            if not open_id:
                return self._error(call, 230013, "Bot has NO availability to this user.")
            chat_id = f"oc_p2p_{open_id}"
        else:
            return self._error(call, 99992402, "field validation failed: receive_id_type")
        message = Message(
            message_id=self._next_id("om_"),
            chat_id=chat_id,
            msg_type=str(msg_type),
            content=str(content),
            uuid=uuid,
            receive_id=receive_id,
            receive_id_type=id_type,
        )
        self._remember(message)
        await self._maybe_hang("message.create")
        return self._ok(self._message_payload(message))

    def _deduped(self, uuid: object) -> Message | None:
        """The message an earlier call with this ``uuid`` made within the window."""
        if not isinstance(uuid, str) or not uuid:
            return None
        with self._lock:
            known = self._by_uuid.get(uuid)
            if known is None or self.clock() - known[1] > self.uuid_window:
                return None
            self.deduped_sends += 1
            return self.messages[known[0]]

    def _remember(self, message: Message) -> None:
        with self._lock:
            self.messages[message.message_id] = message
            if message.uuid:
                self._by_uuid[message.uuid] = (message.message_id, self.clock())

    async def _reply(self, request: Request) -> Response:
        call, failed = await self._begin("message.reply", request)
        if failed:
            return failed
        body = call.body or {}
        parent_id = request.path_params["mid"]
        msg_type, content = body.get("msg_type"), body.get("content")
        if msg_type == "interactive" and (problem := self._check_card(content)):
            return self._error(call, 230099, problem)
        if (known := self._deduped(body.get("uuid"))) is not None:
            return self._ok(self._message_payload(known))
        parent = self.messages.get(parent_id)
        message = Message(
            message_id=self._next_id("om_"),
            chat_id=parent.chat_id if parent else "oc_unknown",
            msg_type=str(msg_type),
            content=str(content),
            parent_id=parent_id,
            uuid=body.get("uuid"),
        )
        self._remember(message)
        await self._maybe_hang("message.reply")
        return self._ok(self._message_payload(message))

    async def _patch(self, request: Request) -> Response:
        call, failed = await self._begin("message.patch", request)
        if failed:
            return failed
        message = self.messages.get(request.path_params["mid"])
        if message is None or message.msg_type != "interactive":
            return self._error(call, 230001, "message not found or not a card")
        content = (call.body or {}).get("content")
        if problem := self._check_card(content):
            return self._error(call, 230099, problem)
        with self._lock:
            message.patches.append(str(content))
            message.content = str(content)
        return self._ok({})

    async def _batch_get_id(self, request: Request) -> Response:
        call, failed = await self._begin("user.batch_get_id", request)
        if failed:
            return failed
        body = call.body or {}
        emails, mobiles = body.get("emails") or [], body.get("mobiles") or []
        if len(emails) > 50 or len(mobiles) > 50:
            return self._error(call, 99992402, "at most 50 emails and 50 mobiles")
        users: list[dict[str, Any]] = []
        for email in emails:
            entry: dict[str, Any] = {"email": email}
            if open_id := self.users.get(email.lower()):
                entry["user_id"] = open_id
            users.append(entry)
        for mobile in mobiles:
            entry = {"mobile": mobile}
            if open_id := self.users.get(mobile):
                entry["user_id"] = open_id
            users.append(entry)
        return self._ok({"user_list": users})

    async def _user(self, request: Request) -> Response:
        call, failed = await self._begin("user.get", request)
        if failed:
            return failed
        open_id = request.path_params["uid"]
        if call.query.get("user_id_type") != "open_id" or open_id not in self.names:
            return self._error(call, 41050, "no user authority error")
        return self._ok({"user": {"open_id": open_id, "name": self.names[open_id]}})

    async def _members(self, request: Request) -> Response:
        call, failed = await self._begin("chat_members.get", request)
        if failed:
            return failed
        chat_id = request.path_params["cid"]
        if chat_id not in self.chats:
            return self._error(call, 232011, "Operator can NOT be out of the chat.")
        members = self.chats[chat_id]
        size = int(call.query.get("page_size") or 20)
        size = max(1, min(size, 100))
        start = int(call.query.get("page_token") or 0)
        page = members[start : start + size]
        more = start + size < len(members)
        items = [
            {"member_id_type": "open_id", "member_id": m, "name": m, "tenant_key": "t"}
            for m in page
        ]
        return self._ok(
            {
                "items": items,
                "page_token": str(start + size) if more else "",
                "has_more": more,
                "member_total": len(members),
            }
        )

    async def _resource(self, request: Request) -> Response:
        call, failed = await self._begin("message_resource.get", request)
        if failed:
            return failed
        key = (request.path_params["mid"], request.path_params["key"])
        found = self.resources.get(key)
        if found is None:
            return self._error(call, 234003, "File not in msg.", 404)
        content, name = found
        return Response(
            content,
            media_type="application/octet-stream",
            headers={"Content-Disposition": f"attachment; filename=\"{quote(name)}\""},
        )

    async def _ephemeral(self, request: Request) -> Response:
        """Like Feishu: a card object (1.0 ``elements`` or 2.0 ``body``), in a group chat
        the bot and the person are in; p2p chats (``oc_p2p_…``) cannot take one."""
        call, failed = await self._begin("ephemeral.send", request)
        if failed:
            return failed
        body = call.body or {}
        chat_id, open_id = str(body.get("chat_id", "")), str(body.get("open_id", ""))
        card = body.get("card")
        if body.get("msg_type") != "interactive" or not isinstance(card, dict) or not (
                isinstance(card.get("elements"), list) or isinstance(card.get("body"), dict)):
            return self._error(call, 99992402, "field validation failed: card")
        if len(json.dumps(card).encode()) > MAX_CARD_BYTES:
            return self._error(call, 230025, "card content exceeds 30 KB")
        if chat_id.startswith("oc_p2p_") or chat_id not in self.chats:
            return self._error(call, 230001, "chat is not a group chat the bot is in")
        if not open_id or open_id not in self.chats[chat_id]:
            return self._error(call, 232033, "the user is not in the chat")
        with self._lock:
            self.ephemerals.append(Ephemeral(chat_id, open_id, card))
        return self._ok({"message_id": self._next_id("om_eph_")})
