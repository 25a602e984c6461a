"""The engine re-checks ask_human args from any runtime, and never posts secrets."""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue
from sqlalchemy import func, select

from bot.agents.base import Outcome
from bot.askhuman.schema import AskHumanToolResult
from storage import HumanRequest, Run
from tests.engine.helpers import ORIGIN, STARTER, AskingRuntime, make_engine

# The "form" agent in the helpers allows every field type but keeps Dify's counts.
TOO_MANY_FIELDS: dict[str, Any] = {
    "question": "Pick?",
    "fields": [{"type": "paragraph", "name": f"f{i}", "label": f"F{i}"} for i in range(9)],
}


def _requests(engine: Any) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(HumanRequest)) or 0)


async def test_remote_runtime_args_are_checked_against_the_agents_guardrails(
    db_url: str,
) -> None:
    engine, adapter, _ = make_engine(db_url, fake=AskingRuntime(TOO_MANY_FIELDS))
    run_id = await engine.start_run("form", "go", STARTER, ORIGIN)
    assert _requests(engine) == 0 and adapter.delivered == []
    with engine.db.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None and run.status == "failed"
        assert run.error == "ask_human fields must contain at most 8 item(s)"
    assert adapter.results == [
        (ORIGIN, "The run failed: ask_human fields must contain at most 8 item(s)")]


class LeakyRuntime:
    """A runtime whose error text carries a credential, as some SDK errors do."""

    name = "leaky"

    async def run(self, prompt: str) -> Outcome:
        raise RuntimeError("401 from https://api.example/v1?key=xoxb-1234-5678-abcdefabcdef")

    async def resume(
        self, snapshot: dict[str, JsonValue], results: dict[str, AskHumanToolResult]
    ) -> Outcome:
        raise AssertionError("never resumed")


async def test_run_failures_are_posted_without_secrets(db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url, fake=LeakyRuntime())  # type: ignore[arg-type]
    await engine.start_run("form", "go", STARTER, ORIGIN)
    (_, text), = adapter.results
    assert text.startswith("The run failed: 401 from") and "xoxb-" not in text
    with engine.db.transaction() as s:
        stored = s.scalars(select(Run.error)).one()
    assert stored is not None and "xoxb-" not in stored
