"""Several deferred calls of one model step: one request each, one resume after all.

On PostgreSQL the two approvals are answered at the same moment from concurrent
transactions; the run row lock makes exactly one of them queue the resume.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import func, select

from bot.agents import AgentSpec, LocalRuntime
from bot.engine import Identity
from storage import HumanRequest, ResumeJob
from tests.engine.helpers import ORIGIN, STARTER
from tests.tools.proc_worker import tool_engine, tool_settings
from tests.tools.scripts import Scripted

ALICE = Identity("slack", "U_ALICE", "Alice")


def _two_calls(db_url: str) -> LocalRuntime:
    agent = tool_settings(db_url, "unused").agents["ops"]
    script = Scripted([("slow_write", {"marker": "a"}), ("slow_write", {"marker": "b"}),
                       ("ask_human", {"question": "And the window?"})])
    return LocalRuntime(AgentSpec(name="ops", model=agent.model, tools=tuple(agent.tools)),
                        model=script.model)


async def test_concurrent_answers_to_one_step_queue_exactly_one_resume(
    db_url: str, tmp_path: Path
) -> None:
    for round_ in range(4):
        engine, adapter, _clock = tool_engine(db_url, "unused", runtime=_two_calls(db_url))
        adapter.delivered.clear()
        await engine.start_run("ops", f"round {round_}", STARTER, ORIGIN)
        actions = {card.ref: "approve" if card.tool else "submit" for card, _ in adapter.delivered}
        refs = list(actions)
        assert sorted(actions.values()) == ["approve", "approve", "submit"]
        with engine.db.transaction() as session:
            rows = list(session.scalars(select(HumanRequest).where(HumanRequest.ref.in_(refs))))
            assert len({r.batch for r in rows}) == 1
            assert sorted(r.kind for r in rows) == ["ask_human", "tool_approval",
                                                    "tool_approval"]
        answers = await asyncio.gather(*(
            engine.respond(ref, ALICE, action, {}) for ref, action in actions.items()))
        assert [a.outcome for a in answers] == ["accepted"] * 3
        with engine.db.transaction() as session:
            jobs = session.scalar(select(func.count()).select_from(ResumeJob).join(
                HumanRequest, HumanRequest.id == ResumeJob.request_id).where(
                HumanRequest.ref.in_(refs)))
        assert jobs == 1
        assert await engine.run_worker_once() == 1
        final = adapter.results[-1][1]
        assert final.splitlines()[:2] == ["slow_write success: written"] * 2
        assert final.splitlines()[2].startswith("ask_human success:")
        engine.db.dispose()
