"""Real ``askhuman serve --workers N`` / ``serve --no-background`` / ``askhuman worker``
processes for the multi-process tests: the CLI as an admin runs it, its config in a
YAML file, the Slack Web API pointed at the loopback fake (not a test module)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from sqlalchemy import func, select

from storage import AuditLog, ClickInbox, Database, Instance, OutboxItem, ResumeJob
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI
from tests.slack.conftest import (
    ALICE,
    APPROVALS,
    BOB,
    CAROL,
    GROUP,
    MALLORY,
    ORIGIN,
    SIGNING_SECRET,
    STARTER,
    Slack,
)

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def fake_slack() -> Iterator[FakeSlackAPI]:
    with FakeSlackAPI(token=BOT_TOKEN) as fake:
        fake.add_users([ALICE, BOB, CAROL, MALLORY, STARTER])
        fake.group_members[GROUP] = [BOB]
        fake.channel_members[APPROVALS] = [CAROL, "UBOT"]
        yield fake


def write_config(tmp_path: Path, db_url: str) -> Path:
    """The deploy agent routed to Slack, as ``tests.slack.conftest.make_settings``."""
    path = tmp_path / "askhuman.yaml"
    path.write_text(yaml.safe_dump({
        "database_url": db_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                              "starters": {"slack": {"users": [STARTER]}}}},
        "routes": {"ops": {"timeout": "30m", "slack": {
            "channel": APPROVALS,
            "approvers": {"users": [ALICE], "groups": [GROUP], "channel_members": True}}}},
    }))
    return path


def slack_env(fake: FakeSlackAPI, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLACK_", "ASKHUMAN_", "FEISHU_"))}
    return {**env, "PYTHONPATH": str(ROOT), "SKIP_SLACK_SDK_WARNING": "1",
            "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": fake.base_url, **extra}


def askhuman(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``python -m bot.cli ARGS`` in a process group of its own (its workers with it)."""
    return subprocess.Popen([sys.executable, "-m", "bot.cli", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> str:
    """SIGTERM (the parent stops its workers), SIGKILL to the group after 20 s; the
    tail of its stderr."""
    if proc.poll() is None:
        proc.terminate()
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=10)
    return err.decode(errors="replace")[-3000:]


async def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            assert proc.poll() is None, stop(proc)
            try:
                if (await http.get(url + "/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("the server did not come up")


def count(database: Database, model: Any, *where: Any) -> int:
    with database.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def live_instances(database: Database) -> list[tuple[str, int]]:
    """``(instance id, pid)`` of every process beating its heartbeat now."""
    with database.transaction() as s:
        return [(row.id, row.pid) for row in s.scalars(
            select(Instance).where(Instance.stopped_at.is_(None)))]


async def until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def cards(fake: FakeSlackAPI) -> list[str]:
    return [m.ts for m in list(fake.messages.values()) if m.channel == APPROVALS and m.blocks]


def final_answers(fake: FakeSlackAPI) -> list[tuple[str, str]]:
    """``(thread, text)`` of every answer posted in a run's thread."""
    return [(m.thread_ts, m.text) for m in list(fake.messages.values())
            if m.channel == ORIGIN and m.thread_ts and m.text.startswith("Deployed")]


def card_updates(fake: FakeSlackAPI) -> dict[str, int]:
    """chat.update calls per card ts."""
    seen: dict[str, int] = {}
    for call in fake.calls_to("chat.update"):
        if call.body.get("channel") == APPROVALS:
            ts = str(call.body["ts"])
            seen[ts] = seen.get(ts, 0) + 1
    return seen


async def post_cards(slack: Slack, n: int, database: Database | None = None) -> list[str]:
    """Start ``n`` deploy runs; the ts of their ``n`` cards.

    With ``database``, also wait until askhuman has stored where each card went: a click
    that lands between Slack's answer and that commit is decided, and the card is then
    updated twice, rightly (the decision's update, and the delivery's, which finds the
    request changed while it was posted), so a test counting updates waits for this."""
    for i in range(n):
        assert (await slack.command(f"run deploy ship v9.{i}.0")).status_code == 200
    await until(lambda: len(cards(slack.fake)) >= n, 60, f"{n} cards")
    if database is not None:
        await until(lambda: count(database, AuditLog, AuditLog.event == "delivered") >= n,
                    60, f"{n} deliveries stored")
    return cards(slack.fake)


UNFINISHED = ("queued", "running", "telling")
"""States of a row someone still works on (``done`` and ``failed`` are final)."""


def settled(database: Database) -> bool:
    """Nothing left to do: every stored click, side effect and resume finished.

    A stored click may end ``failed``: under load its store can outlast the ack's
    budget, the clicker is told it was not recorded, and the row the database took
    after all is closed unused (``ClickInbox.record_click``'s orphan). That is final."""
    return (count(database, ClickInbox, ClickInbox.state.in_(UNFINISHED)) == 0
            and count(database, OutboxItem, OutboxItem.state.in_(("queued", "running"))) == 0
            and count(database, ResumeJob, ResumeJob.state.in_(("queued", "running"))) == 0)


def decided(database: Database) -> int:
    return count(database, AuditLog, AuditLog.event == "decided")


def resumed(database: Database) -> int:
    return count(database, AuditLog, AuditLog.event == "resumed")


def click_holders(database: Database) -> set[str | None]:
    """The processes (instance ids) that stored the clicks."""
    with database.transaction() as s:
        return set(s.scalars(select(ClickInbox.holder)))


@asynccontextmanager
async def client(url: str, fake: FakeSlackAPI) -> AsyncIterator[Slack]:
    async with httpx.AsyncClient(timeout=30) as http:
        yield Slack(url=url, fake=fake, engine=None, database=None,  # type: ignore[arg-type]
                    http=http)


@asynccontextmanager
async def pinned(url: str, fake: FakeSlackAPI, pids: list[int], connections: int,
                 path: str = "/healthz") -> AsyncIterator[list[Slack]]:
    """One client per worker process (``pids``), each holding ``connections`` kept-alive
    connections that only its worker accepted: while a client opens them, every other
    worker is stopped (SIGSTOP), so none of them can accept.

    Left to the kernel, a burst of new connections often goes to whichever worker wakes
    first (it accepts the whole backlog at once), and a test that means to race clicks
    across processes would race them inside one. A client never opens more connections
    than it pinned: requests beyond ``connections`` at a time wait for one of them.
    ``path`` is what the connections are opened with (a GET that answers 200)."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(httpx.AsyncClient(timeout=30, limits=limits))
                   for _ in pids]
        for pid, http in zip(pids, clients, strict=True):
            others = [p for p in pids if p != pid]
            for other in others:
                os.kill(other, signal.SIGSTOP)
            try:
                replies = await asyncio.gather(*(http.get(url + path)
                                                 for _ in range(connections)))
            finally:
                for other in others:
                    os.kill(other, signal.SIGCONT)
            assert [r.status_code for r in replies] == [200] * connections
        yield [Slack(url=url, fake=fake, engine=None, database=None,  # type: ignore[arg-type]
                     http=http) for http in clients]
