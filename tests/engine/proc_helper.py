"""Child-process side of the multi-process tests (run as ``python -m``; not a test module).

Modes:
  respond DB_URL REF FIRST COUNT   fire COUNT concurrent answers from users U<FIRST>…; print JSON
  crash-resume DB_URL MARKER       run the worker; the agent's resume writes MARKER and hangs
  crash-post DB_URL MARKER         run the worker; posting the result writes MARKER and hangs
  hang-resume DB_URL MARKER LEASE  like crash-resume on the wall clock with a LEASE-second
                                   lease that the worker's heartbeat keeps renewing
  crash-decided DB_URL REF MARKER  serve (its loops claim nothing), approve REF: the
                                   decision claims its resume, which writes MARKER and hangs
"""

from __future__ import annotations

import asyncio
import collections
import json
import sys
from pathlib import Path
from typing import Any

from bot.agents import AgentSpec, build_runtime
from bot.agents.base import AgentRuntime, Outcome
from bot.askhuman.schema import AskHumanToolResult
from bot.engine import Identity, Origin
from tests.engine.helpers import make_engine

CROWD = [f"U{i}" for i in range(50)]
CROWD_ROUTE: dict[str, Any] = {
    "timeout": "1h",
    "slack": {"channel": "C_OPS", "approvers": {"users": CROWD}},
}
LEASE_SECONDS = 30.0


class HangingResume:
    """The scripted deploy agent, except that ``resume`` never returns."""

    def __init__(self, marker: str) -> None:
        self.inner: AgentRuntime = build_runtime(AgentSpec(name="deploy", model="scripted:deploy"))
        self.name = "deploy"
        self.marker = marker

    async def run(self, prompt: str) -> Outcome:
        return await self.inner.run(prompt)

    async def resume(self, snapshot: Any, results: dict[str, AskHumanToolResult]) -> Outcome:
        Path(self.marker).write_text("resuming")
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


async def respond(db_url: str, ref: str, first: int, count: int) -> None:
    engine, _, _ = make_engine(db_url, route=CROWD_ROUTE)
    people = [Identity("slack", f"U{i}", f"User {i}") for i in range(first, first + count)]
    results = await asyncio.gather(*(
        engine.respond(ref, p, "approve", {"environment": "staging"}) for p in people))
    print(json.dumps(collections.Counter(r.outcome for r in results)))


async def crash_resume(db_url: str, marker: str) -> None:
    engine, _, _ = make_engine(db_url, lease_seconds=LEASE_SECONDS)
    engine.runtimes.built["deploy"] = HangingResume(marker)
    await engine.run_worker_once()


async def crash_post(db_url: str, marker: str) -> None:
    engine, adapter, _ = make_engine(db_url, lease_seconds=LEASE_SECONDS)

    async def hang(origin: Origin, text: str, key: object = None) -> None:
        Path(marker).write_text(text)
        await asyncio.sleep(3600)

    adapter.post_run_result = hang  # type: ignore[method-assign]
    await engine.run_worker_once()


async def hang_resume(db_url: str, marker: str, lease: float) -> None:
    from tests.engine.model_agents import RealClock

    engine, _, _ = make_engine(db_url, clock=RealClock(), lease_seconds=lease,
                               outbox_lease_seconds=lease)
    engine.runtimes.built["deploy"] = HangingResume(marker)
    await engine.run_worker_once()


async def crash_decided(db_url: str, ref: str, marker: str) -> None:
    """The resume can only be claimed by the decision's own transaction here: the
    resume loop's rounds are replaced by ones that claim nothing."""
    engine, _, _ = make_engine(db_url, lease_seconds=LEASE_SECONDS)
    engine.runtimes.built["deploy"] = HangingResume(marker)

    async def no_round(limit: int, concurrency: int = 1) -> int:
        return 0

    engine.resumes.due = no_round  # type: ignore[method-assign]
    stop = asyncio.Event()
    worker = asyncio.create_task(engine.serve_forever(stop, poll_interval=60.0))
    await asyncio.sleep(0.3)  # the loops run: decisions may claim their resumes
    answer = await engine.respond(ref, Identity("slack", "U_ALICE", "Alice"), "approve",
                                  {"environment": "production"})
    assert answer.outcome == "accepted", answer
    await worker


def main(argv: list[str]) -> None:
    mode, db_url = argv[0], argv[1]
    if mode == "respond":
        asyncio.run(respond(db_url, argv[2], int(argv[3]), int(argv[4])))
    elif mode == "crash-resume":
        asyncio.run(crash_resume(db_url, argv[2]))
    elif mode == "crash-post":
        asyncio.run(crash_post(db_url, argv[2]))
    elif mode == "crash-decided":
        asyncio.run(crash_decided(db_url, argv[2], argv[3]))
    elif mode == "hang-resume":
        asyncio.run(hang_resume(db_url, argv[2], float(argv[3])))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
