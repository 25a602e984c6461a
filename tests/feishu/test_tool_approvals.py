"""Tool calls behind approval, end to end through Feishu (HTTP callbacks, card 2.0).

A Python tool (``fixed`` cluster, approval when replicas > 3) and an MCP tool of the
example server: approve → runs once; reject with a reason → the model gets it and
nothing runs; timeout → nothing runs; hostile values stay plain text on the card.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from bot.commands.serve_cmd import PlatformRuntime, build_app
from bot.engine import Engine
from bot.platforms.feishu import build_feishu_platform
from storage import Database, HumanRequest
from tests.fakes.asgi_server import serve_in_loop
from tests.fakes.feishu_api import FakeFeishuApi, Message
from tests.feishu.conftest import ALICE, APPROVALS, Feishu, make_config, make_settings
from tests.tools import sample_tools
from tests.tools.harness import SCALE_TOOL, events, requests, runs, scripted_runtimes
from tests.tools.harness import with_ops_agent as add_ops
from tests.tools.mcp_server import STDIO_COMMAND, journal_lines
from tests.tools.scripts import Scripted

MCP_TOOL = {"mcp": {"command": STDIO_COMMAND, "env": ["OPS_JOURNAL"]}, "include": ["scale"],
            "approval": "always"}


@pytest.fixture(autouse=True)
def _fresh_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    sample_tools.CALLS.clear()
    monkeypatch.setenv("OPS_JOURNAL", str(tmp_path / "journal.txt"))
    yield
    sample_tools.CALLS.clear()


@pytest.fixture
def script() -> Scripted:
    return Scripted()


@pytest.fixture
def tool() -> str:
    return "python"


@pytest.fixture
async def ops(tmp_path: Path, fake_api: tuple[FakeFeishuApi, str],
              script: Scripted, tool: str) -> AsyncIterator[Feishu]:
    fake, fake_url = fake_api
    url = f"sqlite:///{tmp_path / 'askhuman.db'}"
    settings = add_ops(make_settings(url), [SCALE_TOOL if tool == "python" else MCP_TOOL],
                       route="ops")
    database = Database(url)
    database.upgrade()
    engine = Engine(database, settings, scripted_runtimes(settings, script))
    platform = build_feishu_platform(settings, engine, config=make_config(fake_url, fake.app_id))
    runtime = PlatformRuntime("feishu", platform.endpoints(), platform.background_tasks())
    async with serve_in_loop(build_app(engine, [runtime])) as base, \
            httpx.AsyncClient(timeout=10) as http:
        yield Feishu(fake, engine, database, platform, base, http)
        await engine.close_runtimes()
    database.dispose()


def replies(f: Feishu, parent: str) -> list[str]:
    return [str(json.loads(m.content)["text"]) for m in list(f.fake.messages.values())
            if m.parent_id == parent]


async def final_reply(f: Feishu, origin: str) -> str:
    await f.engine.run_worker_once()
    for _ in range(500):
        if any(r.status in ("succeeded", "failed") for r in runs(f.database)):
            texts = replies(f, origin)
            if texts and not texts[-1].startswith("Ran "):
                return texts[-1]
        await f.engine.run_worker_once()
        import asyncio

        await asyncio.sleep(0.02)
    raise AssertionError(f"no final reply; replies: {replies(f, origin)}")


async def click(f: Feishu, card: Message, action: str, reason: str | None = None) -> None:
    form = {"f_reason": reason} if reason else {}
    await f.click(card, operator=ALICE, action=action, form_value=form)
    assert f.told(ALICE) == []  # taken: the card says it


def card_text(card: Message) -> str:
    return json.dumps(card.card(original=True), ensure_ascii=False)


@pytest.mark.parametrize("tool", ["python", "mcp"])
async def test_approve_runs_once(ops: Feishu, script: Scripted, tool: str,
                                 tmp_path: Path) -> None:
    script.steps = ([("scale", {"service": "api", "replicas": 6})],)
    origin = await ops.send_text("@_user_1 ops: scale api to 6")
    card = await ops.wait_card(APPROVALS)
    text = card_text(card)
    assert "Approve tool call: scale" in text and "replicas: 6" in text
    if tool == "python":
        assert "cluster: prod-eu (fixed by admin)" in text
    await click(ops, card, "approve")
    final = await final_reply(ops, origin)
    if tool == "python":
        assert final == "scale success: scaled api to 6 on prod-eu"
        assert len(sample_tools.CALLS) == 1
    else:
        assert final == "scale success: api now runs 6 replica(s)"
        lines = journal_lines(tmp_path / "journal.txt")
        assert [line.split(" pid=")[0] for line in lines] == ["scale api 6"]
        assert sample_tools.CALLS == []
    assert "Ran scale(service=api, replicas=6): ok" in replies(ops, origin)
    assert events(ops.database).count("tool_started") == 1


@pytest.mark.parametrize("tool", ["python", "mcp"])
async def test_reject_with_reason_reaches_the_model_and_nothing_runs(
    ops: Feishu, script: Scripted, tool: str, tmp_path: Path
) -> None:
    script.steps = ([("scale", {"service": "api", "replicas": 6})],)
    origin = await ops.send_text("@_user_1 ops: scale api to 6")
    card = await ops.wait_card(APPROVALS)
    await click(ops, card, "reject", reason="change freeze")
    final = await final_reply(ops, origin)
    assert final == ("scale denied: The reviewer rejected this call: change freeze "
                     "The action was not run.")
    assert sample_tools.CALLS == [] and journal_lines(tmp_path / "journal.txt") == []
    assert "tool_started" not in events(ops.database)
    patched = await ops.wait_patch(card)
    assert "change freeze" in json.dumps(patched, ensure_ascii=False)


@pytest.mark.parametrize("tool", ["python", "mcp"])
async def test_timeout_never_runs(ops: Feishu, script: Scripted, tool: str,
                                  tmp_path: Path) -> None:
    script.steps = ([("scale", {"service": "api", "replicas": 6})],)
    origin = await ops.send_text("@_user_1 ops: scale api to 6")
    await ops.wait_card(APPROVALS)
    with ops.database.transaction() as session:
        row = session.query(HumanRequest).one()
        session.execute(update(HumanRequest).values(
            created_at=row.created_at - dt.timedelta(hours=2),
            deadline=dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=1)))
    assert await ops.engine.expire_due() == 1
    final = await final_reply(ops, origin)
    assert final == "scale denied: No approval within 2h; the action was not run."
    assert sample_tools.CALLS == [] and journal_lines(tmp_path / "journal.txt") == []
    assert requests(ops.database)[0].status == "timeout"


async def test_hostile_values_stay_plain_text_on_the_card(ops: Feishu, script: Scripted) -> None:
    hostile = "<at id=all></at> @all [spoof](javascript:alert(1)) <at user_id=\"ou_x\">x</at>"
    script.steps = ([("scale", {"service": hostile, "replicas": 9})],)
    await ops.send_text("@_user_1 ops: scale")
    card = await ops.wait_card(APPROVALS)
    shown = card.card(original=True)
    text = json.dumps(shown, ensure_ascii=False)
    assert "<at id=all>" not in text and '<at user_id=' not in text
    assert "@all" not in text  # defused with a word joiner
    assert "[spoof](javascript:alert(1))" in text  # visible, but only as plain text

    def tags(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node["tag"]] if "content" in node and "tag" in node else []
            return found + [t for v in node.values() for t in tags(v)]
        if isinstance(node, list):
            return [t for v in node for t in tags(v)]
        return []

    holders = [t for t in tags(shown["body"]) if t in ("markdown", "lark_md")]
    assert holders == []  # no element of a tool card parses markup
