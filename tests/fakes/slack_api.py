"""A fake Slack Web API: a real aiohttp server on 127.0.0.1, run in a background thread.

Point ``AsyncWebClient(base_url=fake.base_url)`` (or ``SLACK_API_URL``) at it. It answers
the methods askhuman calls, records every call (method, parsed JSON or form body,
headers), keeps posted messages so tests can read what people would see, validates
Block Kit with slack-sdk the way Slack does (``invalid_blocks``), and can inject 429s,
5xx responses and Slack error codes per method for the next N calls. Messages keep
their ``metadata``, which ``conversations.replies`` / ``conversations.history`` return
with ``include_all_metadata`` like Slack does; ``hang_after_accept`` makes a call take
effect and then never answer (the caller is killed while waiting for the response).

It runs in its own thread and event loop so the code under test talks to it over a
real socket, exactly like it would talk to slack.com.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
TEAM_ID = "T0TEST"
BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"

_MESSAGE_METHODS = {"chat.postMessage", "chat.update", "chat.postEphemeral"}


@dataclass
class Call:
    """One recorded Web API call."""

    method: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)
    peer: object = None
    """The client's (host, port): calls over one kept-alive connection share it."""


@dataclass
class _Fault:
    status: int
    error: str
    remaining: int
    retry_after: int | None


@dataclass
class Message:
    """A message as the fake stores it (latest version after chat.update)."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    versions: int = 1
    metadata: dict[str, Any] | None = None

    def as_api(self, with_metadata: bool) -> dict[str, Any]:
        """The message as Slack's history methods return it."""
        out: dict[str, Any] = {"type": "message", "ts": self.ts, "text": self.text,
                               "bot_id": BOT_ID, "user": BOT_USER_ID}
        if self.blocks:
            out["blocks"] = self.blocks
        if self.thread_ts:
            out["thread_ts"] = self.thread_ts
        if with_metadata and self.metadata is not None:
            out["metadata"] = self.metadata
        return out


@dataclass
class _Hang:
    match: Callable[[Mapping[str, Any]], bool]
    seconds: float
    remaining: int


def validate_blocks(blocks: Any) -> str | None:
    """Return an error string like Slack's if ``blocks`` would be rejected, else None."""
    if isinstance(blocks, str):
        try:
            blocks = json.loads(blocks)
        except json.JSONDecodeError:
            return "invalid_blocks_format"
    if not isinstance(blocks, list):
        return "invalid_blocks_format"
    if len(blocks) > 50:
        return "invalid_blocks"
    for index, raw in enumerate(blocks):
        try:
            parsed = Block.parse(raw)
            if parsed is None:
                return f"invalid_blocks [json-pointer:/blocks/{index}/type]"
            parsed.to_dict()
        except (SlackObjectFormationError, TypeError, ValueError, AttributeError) as exc:
            return f"invalid_blocks [json-pointer:/blocks/{index}] {exc}"
    return None


class FakeSlackAPI:
    """The fake server. Use as a context manager or call ``start()`` / ``stop()``."""

    def __init__(self, *, token: str = BOT_TOKEN) -> None:
        self.token = token
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], Message] = {}
        self.group_members: dict[str, list[str]] = {}
        self.channel_members: dict[str, list[str]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.emails: dict[str, str] = {}
        """email -> user id, for ``users.lookupByEmail``."""
        self.enterprise_id: str | None = None
        """The install's Enterprise Grid id that ``auth.test`` reports (None: no Grid)."""
        self.missing_channels: set[str] = set()
        self.response_url_calls: list[dict[str, Any]] = []
        self.views: list[dict[str, Any]] = []
        self.homes: dict[str, dict[str, Any]] = {}
        """user id -> the App Home view last published for them (as Slack stores it)."""
        self.socket_mode_url: str | None = None
        self.socket_acks: list[dict[str, Any]] = []
        self._sockets: list[web.WebSocketResponse] = []
        self._faults: dict[str, list[_Fault]] = {}
        self._hangs: dict[str, list[_Hang]] = {}
        self.hung = threading.Event()
        """Set once a ``hang_after_accept`` call took effect (and now hangs)."""
        self._release: asyncio.Event | None = None
        self.set_cookie: str | None = None
        """A ``Set-Cookie`` header for every Web API answer (slack.com sets cookies)."""
        self.delays: dict[str, float] = {}
        """Seconds to wait before answering a method (a slow Slack), e.g.
        ``{"chat.postEphemeral": 3.0}``."""
        self._lock = threading.Lock()
        self._ts = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # ----------------------------------------------------------------- lifecycle
    @property
    def base_url(self) -> str:
        """Web API base URL with the trailing slash slack-sdk expects."""
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, name: str = "hook") -> str:
        """An absolute ``response_url`` that this fake records (for ``respond()``)."""
        return f"http://127.0.0.1:{self.port}/response_url/{name}"

    def start(self) -> FakeSlackAPI:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake Slack API did not start")
        return self

    def stop(self) -> None:
        loop, runner = self._loop, self._runner
        if loop is None or runner is None:
            return
        if self._release is not None:
            loop.call_soon_threadsafe(self._release.set)  # answer hanging calls now
        for ws in list(self._sockets):
            asyncio.run_coroutine_threadsafe(ws.close(), loop).result(5)
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FakeSlackAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._release = asyncio.Event()
        app = web.Application()
        app.router.add_post("/api/{method}", self._handle)
        app.router.add_get("/api/{method}", self._handle)
        app.router.add_post("/response_url/{name}", self._handle_response_url)
        app.router.add_get("/link", self._handle_socket)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)  # bursts of 100+ clicks
        loop.run_until_complete(site.start())
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._runner = runner
        ready.set()
        loop.run_forever()
        loop.close()

    # ------------------------------------------------------------ configuration
    def fail(
        self,
        method: str,
        *,
        times: int = 1,
        status: int = 200,
        error: str = "internal_error",
        retry_after: int | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail.

        ``status=429`` (with ``retry_after``) simulates rate limiting, ``status>=500`` a
        server error, and ``status=200`` with an ``error`` a Slack error like
        ``channel_not_found``.
        """
        with self._lock:
            self._faults.setdefault(method, []).append(
                _Fault(status=status, error=error, remaining=times, retry_after=retry_after)
            )

    def hang_after_accept(
        self,
        method: str,
        match: Callable[[Mapping[str, Any]], bool] = lambda body: True,
        *,
        seconds: float = 3600.0,
        times: int = 1,
    ) -> None:
        """The next ``times`` calls of ``method`` whose body ``match``es take effect
        (e.g. the message is posted) but are answered only after ``seconds``: the
        caller dies or times out without learning that it worked."""
        with self._lock:
            self._hangs.setdefault(method, []).append(_Hang(match, seconds, times))

    # ------------------------------------------------------------------- queries
    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def message(self, channel: str, ts: str) -> Message | None:
        with self._lock:
            return self.messages.get((channel, ts))

    def thread_replies(self, channel: str, thread_ts: str) -> list[Message]:
        with self._lock:
            return [
                m
                for m in self.messages.values()
                if m.channel == channel and m.thread_ts == thread_ts
            ]

    def clear_calls(self) -> None:
        with self._lock:
            self.calls.clear()

    # --------------------------------------------------------------- socket mode
    def enable_socket_mode(self) -> None:
        """Answer ``apps.connections.open`` with this server's websocket (``/link``)."""
        self.socket_mode_url = f"ws://127.0.0.1:{self.port}/link?ticket=t"

    @property
    def socket_connected(self) -> bool:
        return any(not ws.closed for ws in self._sockets)

    def push(self, envelope: dict[str, Any]) -> None:
        """Send a Socket Mode envelope to every connected client."""
        loop = self._loop
        assert loop is not None
        for ws in list(self._sockets):
            asyncio.run_coroutine_threadsafe(ws.send_str(json.dumps(envelope)), loop).result(5)

    async def _handle_socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_str(json.dumps({"type": "hello", "num_connections": 1}))
        async for msg in ws:
            if msg.type == web.WSMsgType.TEXT:
                with self._lock:
                    self.socket_acks.append(json.loads(msg.data))
        return ws

    # ------------------------------------------------------------------ handlers
    async def _handle_response_url(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.response_url_calls.append(body)
        return web.Response(text="ok")

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        body = await _parse_body(request)
        headers = {k.lower(): v for k, v in request.headers.items()}
        with self._lock:
            peer = request.transport.get_extra_info("peername") if request.transport else None
            self.calls.append(Call(method=method, body=body, headers=headers, peer=peer))
            fault = self._take_fault(method)
        delay = self.delays.get(method)
        if delay:
            await asyncio.sleep(delay)
        if fault is not None:
            return _fault_response(fault)
        token = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if token not in (self.token, APP_TOKEN) and "token" not in body:
            return _json({"ok": False, "error": "not_authed"})
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return _json({"ok": False, "error": "unknown_method"}, status=404)
        result: dict[str, Any] = handler(body)
        hang = self._take_hang(method, body) if result.get("ok") else None
        if hang is not None and self._release is not None:
            self.hung.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._release.wait(), hang.seconds)
        response = _json(result)
        if self.set_cookie is not None:
            response.headers["Set-Cookie"] = self.set_cookie
        return response

    def _take_hang(self, method: str, body: Mapping[str, Any]) -> _Hang | None:
        with self._lock:
            for hang in self._hangs.get(method) or []:
                if hang.remaining > 0 and hang.match(body):
                    hang.remaining -= 1
                    return hang
        return None

    def _take_fault(self, method: str) -> _Fault | None:
        queue = self._faults.get(method) or []
        while queue and queue[0].remaining <= 0:
            queue.pop(0)
        if not queue:
            return None
        queue[0].remaining -= 1
        return queue[0]

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    # ------------------------------------------------------------------ methods
    def _m_auth_test(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://fake.slack.test/",
            "team": "Fake",
            "user": "askhuman",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            **({"enterprise_id": self.enterprise_id} if self.enterprise_id else {}),
        }

    def _check_message(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        channel = str(body.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if channel in self.missing_channels:
            return {"ok": False, "error": "channel_not_found"}
        if "blocks" in body and body["blocks"] is not None:
            error = validate_blocks(body["blocks"])
            if error is not None:
                code, _, detail = error.partition(" ")
                return {"ok": False, "error": code, "errors": [detail or code]}
        if not body.get("text") and not body.get("blocks"):
            return {"ok": False, "error": "no_text"}
        return None

    def _m_chat_postMessage(self, body: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            error = self._check_message(body)
            if error is not None:
                return error
            metadata = _metadata(body.get("metadata"))
            if metadata == {}:
                return {"ok": False, "error": "invalid_metadata_format"}
            ts = self._next_ts()
            msg = Message(
                channel=str(body["channel"]),
                ts=ts,
                text=str(body.get("text") or ""),
                blocks=_blocks(body.get("blocks")),
                thread_ts=body.get("thread_ts"),
                metadata=metadata,
            )
            self.messages[(msg.channel, ts)] = msg
        return {"ok": True, "channel": msg.channel, "ts": ts, "message": {"text": msg.text}}

    def _m_chat_update(self, body: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            error = self._check_message(body)
            if error is not None:
                return error
            key = (str(body["channel"]), str(body.get("ts")))
            msg = self.messages.get(key)
            if msg is None:
                return {"ok": False, "error": "message_not_found"}
            msg.text = str(body.get("text") or msg.text)
            if body.get("blocks") is not None:
                msg.blocks = _blocks(body.get("blocks"))
            msg.versions += 1
        return {"ok": True, "channel": key[0], "ts": key[1], "text": msg.text}

    def _m_chat_postEphemeral(self, body: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            error = self._check_message(body)
            if error is not None:
                return error
            if not body.get("user"):
                return {"ok": False, "error": "user_not_in_channel"}
        return {"ok": True, "message_ts": self._next_ts()}

    def _m_conversations_replies(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A thread, parent first, oldest to newest (``oldest`` / ``latest`` exclusive)."""
        channel, ts = str(body.get("channel") or ""), str(body.get("ts") or "")
        with self._lock:
            if not channel or channel in self.missing_channels:
                return {"ok": False, "error": "channel_not_found"}
            if (channel, ts) not in self.messages:
                return {"ok": False, "error": "thread_not_found"}
            thread = [m for m in self.messages.values() if m.channel == channel
                      and (m.ts == ts or m.thread_ts == ts)]
        thread.sort(key=lambda m: float(m.ts))
        return _page(thread, body)

    def _m_conversations_history(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Top-level messages of a channel, newest first."""
        channel = str(body.get("channel") or "")
        with self._lock:
            if not channel or channel in self.missing_channels:
                return {"ok": False, "error": "channel_not_found"}
            top = [m for m in self.messages.values() if m.channel == channel
                   and (m.thread_ts is None or m.thread_ts == m.ts)]
        top.sort(key=lambda m: float(m.ts), reverse=True)
        return _page(top, body)

    def _m_conversations_open(self, body: Mapping[str, Any]) -> dict[str, Any]:
        users = str(body.get("users") or "")
        if not users:
            return {"ok": False, "error": "users_list_not_supplied"}
        first = users.split(",")[0]
        if first not in self.users and self.users:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "channel": {"id": "D" + first}}

    def _m_usergroups_users_list(self, body: Mapping[str, Any]) -> dict[str, Any]:
        group = str(body.get("usergroup") or "")
        if group not in self.group_members:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(self.group_members[group])}

    def _m_conversations_members(self, body: Mapping[str, Any]) -> dict[str, Any]:
        channel = str(body.get("channel") or "")
        if channel not in self.channel_members:
            return {"ok": False, "error": "channel_not_found"}
        members = list(self.channel_members[channel])
        start = int(body.get("cursor") or 0)
        limit = int(body.get("limit") or 100)
        page = members[start : start + limit]
        next_cursor = str(start + limit) if start + limit < len(members) else ""
        return {"ok": True, "members": page, "response_metadata": {"next_cursor": next_cursor}}

    def _m_users_info(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Like Slack: ``locale`` (e.g. ``zh-CN``) only with ``include_locale=true``."""
        user = str(body.get("user") or "")
        if user not in self.users:
            return {"ok": False, "error": "user_not_found"}
        info = dict(self.users[user])
        if not _truthy(body.get("include_locale")):
            info.pop("locale", None)
        return {"ok": True, "user": info}

    def _m_users_lookupByEmail(self, body: Mapping[str, Any]) -> dict[str, Any]:
        email = str(body.get("email") or "").lower()
        if email not in self.emails:
            return {"ok": False, "error": "users_not_found"}
        return {"ok": True, "user": self.users.get(self.emails[email], {"id": self.emails[email]})}

    def _m_views_open(self, body: Mapping[str, Any]) -> dict[str, Any]:
        view = body.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        if not body.get("trigger_id"):
            return {"ok": False, "error": "invalid_trigger_id"}
        try:
            View(**view).to_dict()
        except (SlackObjectFormationError, TypeError, ValueError) as exc:
            return {"ok": False, "error": "invalid_arguments", "errors": [str(exc)]}
        with self._lock:
            self.views.append(view)
        return {"ok": True, "view": {"id": f"V{len(self.views)}", **view}}

    def _m_views_publish(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Publish a user's App Home: ``user_id`` + ``view`` (a JSON object, or a JSON
        string in a form body) of type ``home``, at most 100 blocks, validated with
        slack-sdk; an optional ``hash`` must match the last one (``hash_conflict``)."""
        user = str(body.get("user_id") or "")
        view = body.get("view")
        if isinstance(view, str):
            try:
                view = json.loads(view)
            except json.JSONDecodeError:
                return {"ok": False, "error": "invalid_arguments"}
        if not user:
            return {"ok": False, "error": "invalid_arguments",
                    "response_metadata": {"messages": ["[ERROR] missing required field: user_id"]}}
        if self.users and user not in self.users:
            return {"ok": False, "error": "user_not_found"}
        if not isinstance(view, dict) or view.get("type") != "home":
            return {"ok": False, "error": "invalid_arguments",
                    "response_metadata": {"messages": ["[ERROR] view.type must be home"]}}
        blocks = view.get("blocks") or []
        error = validate_blocks(blocks) if len(blocks) <= 100 else "invalid_blocks too many"
        if error is None:
            try:
                View(**view).to_dict()
            except (SlackObjectFormationError, TypeError, ValueError) as exc:
                error = f"invalid_arguments {exc}"
        if error is not None:
            code, _, detail = error.partition(" ")
            return {"ok": False, "error": "invalid_arguments",
                    "response_metadata": {"messages": [f"[ERROR] {code} {detail}".strip()]}}
        with self._lock:
            previous = self.homes.get(user)
            if body.get("hash") and previous is not None and body["hash"] != previous["hash"]:
                return {"ok": False, "error": "hash_conflict"}
            number = len(self.views) + len(self.homes) + 1
            stored = {"id": previous["id"] if previous else f"VH{number}", "team_id": TEAM_ID,
                      "type": "home", "blocks": blocks,
                      "private_metadata": view.get("private_metadata", ""),
                      "callback_id": view.get("callback_id", ""), "state": {"values": {}},
                      "hash": f"{int(time.time())}.{next(self._ts)}",
                      "clear_on_close": False, "notify_on_close": False,
                      "root_view_id": None, "previous_view_id": None, "app_id": "A0APP",
                      "external_id": view.get("external_id", ""), "bot_id": BOT_ID}
            stored["root_view_id"] = stored["id"]
            self.homes[user] = stored
        return {"ok": True, "view": stored}

    def _m_apps_connections_open(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.socket_mode_url is None:
            return {"ok": False, "error": "not_allowed_token_type"}
        return {"ok": True, "url": self.socket_mode_url}

    # ------------------------------------------------------------------ helpers
    def add_users(self, users: Iterable[str], team: str = TEAM_ID) -> None:
        """Register users so ``users.info`` and ``conversations.open`` know them
        (``team``: their own workspace; another one makes them Slack Connect guests)."""
        for user in users:
            self.users[user] = {
                "id": user,
                "team_id": team,
                "name": user.lower(),
                "real_name": f"User {user}",
                "profile": {"display_name": f"user-{user.lower()}"},
            }


async def _parse_body(request: web.Request) -> dict[str, Any]:
    raw = await request.text()
    ctype = request.headers.get("content-type", "")
    if "json" in ctype:
        return dict(json.loads(raw or "{}"))
    body: dict[str, Any] = dict(parse_qsl(raw, keep_blank_values=True))
    for key in ("blocks", "view"):
        if isinstance(body.get(key), str):
            with contextlib.suppress(json.JSONDecodeError):
                body[key] = json.loads(body[key])
    body.update({k: v for k, v in request.query.items() if k not in body})
    return body


def _metadata(value: Any) -> dict[str, Any] | None:
    """Parsed message metadata; ``{}`` when it is malformed (Slack refuses those)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {}
    if (not isinstance(value, dict) or not isinstance(value.get("event_type"), str)
            or not isinstance(value.get("event_payload"), dict)):
        return {}
    return {"event_type": value["event_type"], "event_payload": dict(value["event_payload"])}


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("1", "true")


def _page(messages: list[Message], body: Mapping[str, Any]) -> dict[str, Any]:
    """One page of a history method: ``oldest``/``latest`` filters, ``limit``, ``cursor``."""
    oldest, latest = body.get("oldest"), body.get("latest")
    if oldest:
        messages = [m for m in messages if float(m.ts) > float(oldest)]
    if latest:
        messages = [m for m in messages if float(m.ts) < float(latest)]
    start = int(body.get("cursor") or 0)
    limit = max(1, min(int(body.get("limit") or 100), 1000))
    page = messages[start : start + limit]
    more = start + limit < len(messages)
    with_metadata = _truthy(body.get("include_all_metadata"))
    return {"ok": True, "messages": [m.as_api(with_metadata) for m in page],
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""}}


def _blocks(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        value = json.loads(value)
    return list(value or [])


def _json(payload: Mapping[str, Any], status: int = 200) -> web.Response:
    return web.json_response(dict(payload), status=status)


def _fault_response(fault: _Fault) -> web.Response:
    headers = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = str(fault.retry_after)
    error = "ratelimited" if fault.status == 429 else fault.error
    return web.json_response({"ok": False, "error": error}, status=fault.status, headers=headers)
