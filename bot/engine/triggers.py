"""Runs started by events (``POST /api/v1/runs``) and by schedules (``schedules:``).

Either way a ``run_triggers`` row is written first — born ``claimed`` with a lease —
and the run (whose id is the row's id) starts after that commit, in the background.
A schedule's firing is the unique pair ``(schedule, fire_at)``: every replica computes
the same cron times, tries the insert, and exactly one succeeds. After downtime the
missed times are coalesced into one catch-up run (the latest missed time), unless the
schedule says ``catch_up: false``. If a process dies between the claim and the run's
first write, the lease runs out and ``reclaim_triggers`` starts it again; a trigger
whose run row exists is only marked ``started`` — a run is never started twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot.engine import store
from bot.engine.cards import as_utc
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.ports import Identity, Origin
from bot.engine.runs import RunStarter
from bot.engine.wakeups import Background
from bot.settings import RouteSettings, ScheduleSettings
from bot.settings.routes import LOCAL_PLATFORM
from storage import HumanRequest, Run, RunTrigger

SCHEDULE_GRACE = dt.timedelta(minutes=2)
"""With ``catch_up: false``, a fire time older than this (downtime) is skipped."""


@dataclass(frozen=True)
class RunView:
    """A triggered run as its API client sees it."""

    id: str
    agent: str
    status: str
    """queued | running | waiting | succeeded | failed."""
    output: object
    error: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    requests: list[dict[str, str]]
    """The run's requests: ``{ref, status}``, oldest first."""


def origin_for_route(routes: Mapping[str, RouteSettings], route_name: str) -> Origin:
    """Where a triggered run's final answer goes: the route's first platform that names
    a place for it (its channel or chat, or a user's DM), else the console."""
    route = routes.get(route_name)
    for platform in route.platforms() if route is not None else []:
        section = route.section(platform) if route is not None else None
        if section is not None and not section.local:
            return Origin(platform, section.origin)
    return Origin(LOCAL_PLATFORM)


class Triggers:
    """Event- and schedule-started runs, claimed exactly once across replicas."""

    def __init__(self, ctx: EngineContext, committer: Committer, starter: RunStarter,
                 background: Background) -> None:
        self._ctx = ctx
        self._committer = committer
        self._starter = starter
        self._background = background
        self._schedules_since: dt.datetime | None = None
        """First sweep of this process: schedules never fired before count from here."""

    async def start_run(
        self, agent: str, prompt: str, started_by: Identity, origin: Origin, *,
        source: str = "api", client_id: int | None = None,
        trace_context: dict[str, Any] | None = None,
    ) -> str:
        """Record the trigger, then start the run in the background; returns its id.
        ``trace_context``: the caller's W3C context, kept for the run it starts."""
        run_id = uuid.uuid4().hex
        now = self._ctx.now()

        def insert(session: Session) -> None:
            session.add(RunTrigger(
                id=run_id, source=source, client_id=client_id, agent=agent, prompt=prompt,
                origin_platform=origin.platform, origin_channel=origin.channel,
                state="claimed", lease_until=now + self._ctx.tuning.trigger_lease, created_at=now,
                updated_at=now, trace_context=trace_context))
            store.audit(session, now, "run_triggered", run_id=run_id, actor=started_by,
                        details={"agent": agent, "source": source})

        await self._committer.tx(insert)
        self._launch(run_id, agent, prompt, started_by, origin, trace_context)
        return run_id

    def _launch(
        self, run_id: str, agent: str, prompt: str, who: Identity, origin: Origin,
        trace_context: dict[str, Any] | None = None,
    ) -> None:
        self._background.start(self._run_trigger(run_id, agent, prompt, who, origin,
                                                 trace_context))

    async def _run_trigger(
        self, run_id: str, agent: str, prompt: str, who: Identity, origin: Origin,
        trace_context: dict[str, Any] | None,
    ) -> None:
        try:
            # Authenticated otherwise: an API key scoped to this agent, or admin config.
            await self._starter.start(agent, prompt, who, origin, run_id=run_id,
                                      check_starters=False, trace_context=trace_context)
        except Exception:
            log.exception("triggered run could not start", extra={"run_id": run_id})
        finally:
            with contextlib.suppress(Exception):
                await self._committer.tx(lambda s: _mark_started(s, run_id, self._ctx.now()))

    async def run_view(self, client_id: int | None, run_id: str) -> RunView | None:
        """The run ``run_id`` if ``client_id`` triggered it (None: unknown or not theirs)."""

        def find(session: Session) -> RunView | None:
            trigger = session.get(RunTrigger, run_id[:64])
            if trigger is None or trigger.client_id != client_id:
                return None
            run = session.get(Run, trigger.id)
            requests = [{"ref": ref, "status": status} for ref, status in session.execute(
                select(HumanRequest.ref, HumanRequest.status)
                .where(HumanRequest.run_id == trigger.id).order_by(HumanRequest.id))]
            created = as_utc(trigger.created_at)
            assert created is not None
            if run is None:
                return RunView(trigger.id, trigger.agent, "queued", None, None, created,
                               created, requests)
            updated = as_utc(run.updated_at)
            assert updated is not None
            return RunView(run.id, run.agent, run.status, run.output, run.error, created,
                           updated, requests)

        return await self._committer.read(find)

    # ------------------------------------------------------------------ schedules

    async def fire_due_schedules(self) -> int:
        """Fire every schedule whose cron time has come; returns how many this replica
        fired (another replica may have won a firing: then it is skipped here)."""
        fired = 0
        now = self._ctx.now()
        if self._schedules_since is None:
            self._schedules_since = now
        since = self._schedules_since
        for name, schedule in self._ctx.settings.schedules.items():
            last = await self._committer.read(partial(_last_fire, name=name))
            due = _due_time(schedule, last or since, now)
            if due is None:
                continue
            if await self._fire(name, schedule, due):
                fired += 1
        return fired

    async def _fire(self, name: str, schedule: ScheduleSettings, due: dt.datetime) -> bool:
        run_id = uuid.uuid4().hex
        now = self._ctx.now()
        route = schedule.route or self._ctx.settings.agents[schedule.agent].route
        origin = origin_for_route(self._ctx.settings.routes, route)
        who = Identity("schedule", name, f"schedule {name}")

        def insert(session: Session) -> None:
            session.add(RunTrigger(
                id=run_id, source="schedule", schedule=name, fire_at=due, agent=schedule.agent,
                prompt=schedule.prompt, origin_platform=origin.platform,
                origin_channel=origin.channel, state="claimed",
                lease_until=now + self._ctx.tuning.trigger_lease, created_at=now, updated_at=now))
            session.flush()
            store.audit(session, now, "schedule_fired", run_id=run_id, actor=who,
                        details={"schedule": name, "fire_at": due.isoformat()})

        try:
            await self._committer.tx(insert)
        except IntegrityError:
            return False  # another replica fired this time
        log.info("schedule fired", extra={"schedule": name, "run_id": run_id,
                                          "fire_at": due.isoformat()})
        self._launch(run_id, schedule.agent, schedule.prompt, who, origin)
        return True

    async def reclaim_triggers(self) -> int:
        """Restart triggers whose process died before the run began; returns how many."""
        now = self._ctx.now()

        def claim(session: Session) -> list[RunTrigger]:
            rows = session.scalars(select(RunTrigger).where(
                RunTrigger.state == "claimed", RunTrigger.lease_until < now).limit(50)).all()
            mine = []
            for row in rows:
                if session.get(Run, row.id) is not None:
                    _mark_started(session, row.id, now)
                    continue
                won = store.rowcount(session.execute(
                    update(RunTrigger)
                    .where(RunTrigger.id == row.id, RunTrigger.state == "claimed",
                           RunTrigger.lease_until == row.lease_until)
                    .values(lease_until=now + self._ctx.tuning.trigger_lease, updated_at=now)
                    .execution_options(synchronize_session=False)))
                if won == 1:
                    mine.append(row)
            return mine

        rows = await self._committer.tx(claim)
        for row in rows:
            who = Identity("schedule", row.schedule) if row.schedule else Identity(
                "api", "api", None)
            origin = Origin(row.origin_platform, row.origin_channel)
            log.warning("restarting a trigger whose run never began", extra={"run_id": row.id})
            self._launch(row.id, row.agent, row.prompt, who, origin, row.trace_context)
        return len(rows)

    async def schedule_forever(self, stop: asyncio.Event, interval: float = 10.0) -> None:
        """Fire due schedules and reclaim stuck triggers until ``stop`` is set."""
        while not stop.is_set():
            try:
                await self.fire_due_schedules()
                await self.reclaim_triggers()
            except Exception:
                log.exception("schedule sweep failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)


def _last_fire(session: Session, *, name: str) -> dt.datetime | None:
    fired: dt.datetime | None = session.scalar(
        select(func.max(RunTrigger.fire_at)).where(RunTrigger.schedule == name))
    return fired


def _mark_started(session: Session, run_id: str, now: dt.datetime) -> None:
    session.execute(update(RunTrigger).where(RunTrigger.id == run_id)
                    .values(state="started", lease_until=None, updated_at=now)
                    .execution_options(synchronize_session=False))


def _due_time(
    schedule: ScheduleSettings, after: dt.datetime, now: dt.datetime
) -> dt.datetime | None:
    """The latest cron time in ``(after, now]`` (naive UTC), or None.

    Several missed times collapse into the latest one (one catch-up run); without
    ``catch_up`` a time older than ``SCHEDULE_GRACE`` is skipped.
    """
    start = after.replace(tzinfo=dt.UTC)
    limit = now.replace(tzinfo=dt.UTC)
    from croniter import croniter  # loaded with the first schedule (about 1 MB)

    # The latest cron time <= now (get_prev is strict, hence the extra second).
    latest: dt.datetime = croniter(schedule.cron, limit + dt.timedelta(seconds=1)).get_prev(
        dt.datetime)
    due = latest if start < latest <= limit else None
    if due is None:
        return None
    if not schedule.catch_up and limit - due > SCHEDULE_GRACE:
        return None
    return due.replace(tzinfo=None)
