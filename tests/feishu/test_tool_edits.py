"""Approve with edits through Feishu: the form's prefilled inputs, the run with the
edited call, and an invalid value refused in the toast (in the card's language)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from bot.commands.serve_cmd import PlatformRuntime, build_app
from bot.engine import Engine, audit_chain
from bot.platforms.feishu import build_feishu_platform
from storage import Database, Vote
from tests.fakes.asgi_server import serve_in_loop
from tests.fakes.feishu_api import FakeFeishuApi
from tests.feishu.conftest import ALICE, APPROVALS, Feishu, make_config, make_settings
from tests.feishu.test_tool_approvals import card_text, final_reply
from tests.slack.test_tool_edits import EDITABLE_SCALE
from tests.tools import sample_tools
from tests.tools.harness import audit_rows, events, requests, scripted_runtimes
from tests.tools.harness import with_ops_agent as add_ops
from tests.tools.scripts import Scripted


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    sample_tools.CALLS.clear()
    yield
    sample_tools.CALLS.clear()


@pytest.fixture
def locale() -> str:
    return "en"


@pytest.fixture
async def ops(tmp_path: Path, fake_api: tuple[FakeFeishuApi, str], locale: str
              ) -> AsyncIterator[Feishu]:
    fake, fake_url = fake_api
    url = f"sqlite:///{tmp_path / 'askhuman.db'}"
    settings = add_ops(make_settings(url, locale=locale), [EDITABLE_SCALE], route="ops")
    database = Database(url)
    database.upgrade()
    script = Scripted([("scale", {"service": "api", "replicas": 10})])
    engine = Engine(database, settings, scripted_runtimes(settings, script))
    platform = build_feishu_platform(settings, engine, config=make_config(fake_url, fake.app_id))
    runtime = PlatformRuntime("feishu", platform.endpoints(), platform.background_tasks())
    async with serve_in_loop(build_app(engine, [runtime])) as base, \
            httpx.AsyncClient(timeout=10) as http:
        yield Feishu(fake, engine, database, platform, base, http)
        await engine.close_runtimes()
    database.dispose()


async def test_edit_in_the_form_runs_the_edited_call_once(ops: Feishu) -> None:
    origin = await ops.send_text("@_user_1 ops: scale api")
    card = await ops.wait_card(APPROVALS)
    form = next(e for e in card.card(original=True)["body"]["elements"] if e["tag"] == "form")
    inputs = {e["name"]: e for e in form["elements"] if e.get("name", "").startswith("f_")}
    assert inputs["f_edit_0"]["default_value"] == "10"  # prefilled, typed from the schema
    assert "Edit and approve" in card_text(card)

    await ops.click(card, operator=ALICE, action="approve_edit",
                    form_value={"f_edit_0": "5", "f_reason": "10 is too many"})
    final = await final_reply(ops, origin)
    assert sample_tools.CALLS == [("scale", {"service": "api", "replicas": 5,
                                             "cluster": "prod-eu"})]
    assert "a reviewer edited the arguments before approving" in final
    patched = json.dumps(await ops.wait_patch(card), ensure_ascii=False)
    assert "replicas: 10 → 5, edited by" in patched
    edited = next(d for e, _o, d, _r in audit_rows(ops.database) if e == "tool_call_edited")
    assert (edited["args_before"]["replicas"], edited["args_after"]["replicas"]) == (10, 5)
    with ops.database.transaction() as session:
        assert audit_chain.verify(session).ok


@pytest.mark.parametrize(("locale", "words"), [("en", "“replicas” must be at most 20"),
                                                ("zh-CN", "“replicas” 不能大于 20")])
async def test_an_invalid_edit_is_refused_in_the_toast_and_nothing_is_recorded(
    ops: Feishu, words: str
) -> None:
    await ops.send_text("@_user_1 ops: scale api")
    card = await ops.wait_card(APPROVALS)
    response = await ops.click(card, operator=ALICE, action="approve_edit",
                               form_value={"f_edit_0": "50"})
    toast = response.json()["toast"]
    assert toast["type"] == "error" and words in toast["content"], toast
    row = requests(ops.database)[0]
    assert row.status == "pending" and "edit" not in row.tool
    with ops.database.transaction() as session:
        assert session.query(Vote).count() == 0
    assert "tool_call_edited" not in events(ops.database)
    assert sample_tools.CALLS == []


async def test_a_plain_approve_with_changed_inputs_is_refused(ops: Feishu) -> None:
    await ops.send_text("@_user_1 ops: scale api")
    card = await ops.wait_card(APPROVALS)
    response = await ops.click(card, operator=ALICE, action="approve",
                               form_value={"f_edit_0": "5"})
    toast = response.json()["toast"]
    assert toast["type"] == "error" and "You changed replicas" in toast["content"], toast
    assert "“Edit and approve”" in toast["content"]
    assert requests(ops.database)[0].status == "pending" and sample_tools.CALLS == []
    # unchanged inputs (Feishu sends them with every button) approve as asked
    await ops.click(card, operator=ALICE, action="approve", form_value={"f_edit_0": "10"})
    assert requests(ops.database)[0].status == "submitted"
