"""The Bolt ``AsyncApp``: one listener per concern, wired to the engine.

Nothing here talks to the database or renders blocks; listeners translate Slack
payloads into engine calls. The same app serves HTTP (``/slack/events``, signed
requests) and Socket Mode (no signature; the websocket is authenticated instead).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from slack_bolt.async_app import AsyncApp, AsyncBoltRequest
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from bot.engine.ports import Identity
from bot.platforms.slack.batch import BatchListener
from bot.platforms.slack.dedupe import RecentIds
from bot.platforms.slack.directory import SlackDirectory
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.fast_clicks import FastClick, FastClicks
from bot.platforms.slack.home import HomeTab
from bot.platforms.slack.inbound import Refusal, bolt_request, check_signature, log_refusal
from bot.platforms.slack.listeners.actions import (
    AcksFirst,
    ActionListener,
    FileButtonListener,
    WithdrawListener,
    ignore_other_actions,
)
from bot.platforms.slack.listeners.commands import CommandListener
from bot.platforms.slack.listeners.edits import EditButtonListener, EditSubmissionListener
from bot.platforms.slack.listeners.grants import GrantRevokeListener
from bot.platforms.slack.listeners.home import HomeOpenedListener
from bot.platforms.slack.listeners.mentions import MentionListener
from bot.platforms.slack.listeners.views import FileSubmissionListener
from bot.platforms.slack.replies import audit_refusal
from renderers import slack as render
from renderers.slack.batch_list import BATCH_ACTION_ID_PATTERN
from renderers.slack.grants import REVOKE_ACTION_ID_PATTERN

log = logging.getLogger(__name__)

COMMAND = "/askhuman"
EVENTS_PATH = "/slack/events"
ANY_ACTION_ID = re.compile("")


def dedupe_events(seen: RecentIds, engine: SlackEngine | None = None) -> AsyncMiddleware:
    """Middleware: an Events API delivery we already took is acked, not re-processed.

    Slack retries events (``X-Slack-Retry-Num``) when an ack was slow or lost, and the
    retry may reach another replica. The in-memory ``seen`` set is a quick first
    filter for this process; ``engine.first_seen`` (one INSERT into the shared
    ``seen_events`` table) catches retries that another replica already took. The
    first delivery of an ``event_id`` is processed even if it carries a retry header,
    because the original may never have reached us. Duplicates are audited (Bolt has
    verified the request before any middleware of ours runs).
    """
    return _DedupeEvents(seen, engine)


class _DedupeEvents(AsyncMiddleware):
    """``dedupe_events`` as a class: Bolt calls it as ``async_process(req, resp, next)``
    without building the keyword arguments a function middleware gets, which every
    request (every click of a burst, too) would otherwise pay for."""

    def __init__(self, seen: RecentIds, engine: SlackEngine | None) -> None:
        self._seen = seen
        self._engine = engine

    async def async_process(
        self, *, req: AsyncBoltRequest, resp: BoltResponse,
        next: Callable[[], Awaitable[BoltResponse]],
    ) -> BoltResponse | None:
        body = req.body
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if not event_id:
            return await next()
        key, engine = str(event_id), self._engine
        duplicate = not self._seen.add(key)
        if not duplicate and engine is not None:
            try:
                duplicate = not await engine.first_seen("slack", f"event:{key}")
            except Exception:
                # Fail open: this replica still dedupes in memory, and decisions are
                # compare-and-set in the database anyway.
                log.exception("shared slack event dedupe failed; processing the event",
                              extra={"platform": "slack", "event_id": key})
        if not duplicate:
            return await next()
        log.info("duplicate slack event ignored", extra={"platform": "slack", "event_id": key})
        if engine is not None:
            event = body.get("event")
            event = event if isinstance(event, dict) else {}
            user = event.get("user")
            who = Identity("slack", str(user)) if user else None
            await audit_refusal(engine, None, who, "Duplicate Slack event (already processed).",
                                check="duplicate_event", event_id=key[:200],
                                event_type=str(event.get("type") or "")[:64])
        return BoltResponse(status=200, body="", headers={"X-Slack-No-Retries": "1"})


class _UnusedEnvTokenFilter(logging.Filter):
    """Drop Bolt's "`token` will be unused" warning while the app is built.

    We pass Bolt only the ``client`` (it carries the bot token, the fake's base URL and
    our retry handlers), never a ``token``. Bolt still reads ``SLACK_BOT_TOKEN`` from
    the environment on its own and then warns that this token is unused, at every
    start. The warning says nothing an admin can act on; every other one passes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def build_app(
    engine: SlackEngine,
    client: AsyncWebClient,
    *,
    signing_secret: str | None,
    directory: SlackDirectory | None = None,
    command: str = COMMAND,
    seen_events: RecentIds | None = None,
    home: HomeTab | None = None,
    acks_first: AcksFirst | None = None,
    clicks: ActionListener | None = None,
    fast: FastClicks | None = None,
) -> AsyncApp:
    """The Bolt app. ``signing_secret=None`` is only valid for Socket Mode; ``home``
    serves App Home (``app_home_opened``, refusals of clicks on Home); ``acks_first``
    is shared by the click listeners (and ``http_endpoint``), so decisions wait for the
    whole burst's acks. ``clicks`` is the card-button listener (the one ``fast``, the
    fast path for plain clicks over HTTP, shares), and ``fast`` opens once Bolt has
    authorized a request."""
    acks_first = acks_first or AcksFirst()
    bolt_log = logging.getLogger("bot.platforms.slack.bolt")
    quiet = _UnusedEnvTokenFilter()
    bolt_log.addFilter(quiet)
    try:
        app = AsyncApp(
            # Bolt's default name comes from ``inspect.stack()``, which reads the source of
            # every calling module into ``linecache`` (about 0.5 MB kept). The name it
            # would find here is this file's, so Bolt's logger names stay as they were.
            name="app.py",
            client=client,
            signing_secret=signing_secret or "",
            request_verification_enabled=signing_secret is not None,
            logger=bolt_log,
        )
    finally:
        bolt_log.removeFilter(quiet)
    app.middleware(dedupe_events(seen_events or RecentIds(), engine))
    if fast is not None:
        app.middleware(fast.opener())
    # Card buttons first: Bolt tries listeners in order, each matcher costs a call, and
    # a burst of clicks should not pay for the command and event matchers (the
    # ``ah:``, ``ahf:`` and ``ahw:`` prefixes never overlap).
    # Clicks are stored in listener middleware (``before_ack``), before Bolt starts the
    # listener's ack clock (see ``ActionListener.before_ack``).
    clicks = clicks or ActionListener(engine, home=home, acks_first=acks_first)
    app.action(render.ACTION_ID_PATTERN, middleware=[clicks.before_ack])(clicks)
    commands = CommandListener(engine)
    app.command(command, middleware=[commands.before_ack])(commands)
    mentions = MentionListener(engine, directory)
    app.event("app_mention", middleware=[mentions.before_ack])(mentions)
    app.action(render.FILE_ACTION_ID_PATTERN)(FileButtonListener(engine))
    app.action(render.EDIT_ACTION_ID_PATTERN)(EditButtonListener(engine))
    withdraw = WithdrawListener(engine, home=home, acks_first=acks_first)
    app.action(render.WITHDRAW_ACTION_ID_PATTERN, middleware=[withdraw.before_ack])(withdraw)
    app.action(REVOKE_ACTION_ID_PATTERN)(GrantRevokeListener(engine, home=home))
    batch = BatchListener(engine, home=home, acks_first=acks_first)
    app.action(BATCH_ACTION_ID_PATTERN, middleware=[batch.before_ack])(batch)
    if home is not None:
        app.event("app_home_opened")(HomeOpenedListener(home))
    # Last, so every listener above wins: any other block action (a foreign or stale
    # button, a URL button) is acked, never left to Bolt's 404. A constraint of only
    # ``{"type": "block_actions"}`` matches nothing in Bolt (it needs an action_id or a
    # block_id), hence the pattern that matches every action_id.
    app.action({"type": "block_actions", "action_id": ANY_ACTION_ID})(ignore_other_actions)
    app.view(render.FILE_MODAL_CALLBACK_ID)(FileSubmissionListener(engine))
    app.view(render.EDIT_MODAL_CALLBACK_ID)(EditSubmissionListener(engine))
    return app


def http_endpoint(
    app: AsyncApp, signing_secret: str, acks_first: AcksFirst | None = None,
    fast: FastClicks | None = None,
) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint for ``/slack/events`` (events, interactivity, commands).

    The raw body's signature is verified (``inbound.check_signature``) before anything
    else. A plain card click then takes the fast path (``fast``,
    ``bot.platforms.slack.fast_clicks``); everything else goes to Bolt, whose request is
    built (and the body parsed) only now; see ``bot.platforms.slack.inbound``.
    Every request is reported to ``acks_first`` (the one ``build_app`` was given) from
    its arrival until its response is handed back, so decisions start after a burst's
    responses, not while they are still being sent.
    """
    from slack_bolt.adapter.starlette.async_handler import to_starlette_response

    verifier = SignatureVerifier(signing_secret)
    first = acks_first or AcksFirst()

    async def endpoint(request: Request) -> Response:
        body = await request.body()  # at most ``http.max_body_bytes`` (bot.web.BodyLimit)
        refusal = check_signature(verifier, body, request.headers)
        click = fast.read(body, request.headers) if fast and refusal is None else None
        checked = refusal or click or bolt_request(request, body)
        if isinstance(checked, Refusal):
            log_refusal(checked, request)
            return PlainTextResponse(checked.reason, status_code=checked.status)
        first.arrived()
        try:
            if isinstance(checked, FastClick):
                assert fast is not None
                return await fast.take(checked)
            return to_starlette_response(await app.async_dispatch(checked))
        finally:
            first.acked()

    return endpoint
