"""Delivery: retries with backoff, permanent failures, uuid idempotency, targets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.askhuman.schema import AskHumanToolArgs
from bot.engine.ports import DeliveryError, DeliveryRef, DeliveryTarget, Origin
from bot.platforms.feishu.adapter import FeishuAdapter, delivery_uuid, plain_text
from bot.platforms.feishu.client import FeishuApi, FeishuApiError
from bot.platforms.feishu.handlers import toast
from renderers.card import RequestCard
from renderers.markdown import check_plain
from tests.fakes.feishu_api import FakeFeishuApi
from tests.feishu.conftest import ALICE, ALICE_EMAIL, APPROVALS, Feishu, make_config

ARGS = AskHumanToolArgs.model_validate({
    "question": "Ship it?",
    "actions": [{"id": "yes", "label": "Yes", "style": "primary"}],
})


def make_adapter(
    fake_api: tuple[FakeFeishuApi, str], **kw: Any
) -> tuple[FakeFeishuApi, FeishuAdapter]:
    fake, url = fake_api
    return fake, FeishuAdapter(FeishuApi(make_config(url, fake.app_id, **kw)))


def card(ref: str = "ref_1", **kw: Any) -> RequestCard:
    return RequestCard(ref=ref, args=ARGS, agent_name="deploy", **kw)


@pytest.mark.parametrize(
    "failure",
    [
        {"status": 429},
        {"status": 500},
        {"status": 503, "raw_body": "<html>Service Unavailable</html>"},
        {"status": 200, "code": 99991400},
        {"status": 400, "code": 230020},
    ],
)
async def test_transient_failures_are_retried(fake_api: Any, failure: dict[str, Any]) -> None:
    fake, adapter = make_adapter(fake_api)
    fake.fail_next("message.create", 2, **failure)
    ref = await adapter.deliver(card(), DeliveryTarget("channel", APPROVALS))
    calls = fake.calls_to("message.create")
    assert len(calls) == 3
    expected_uuid = delivery_uuid("ref_1", DeliveryTarget("channel", APPROVALS))
    assert {c.body["uuid"] for c in calls} == {expected_uuid}
    assert ref == DeliveryRef("feishu", APPROVALS, next(iter(fake.messages)))
    assert len(fake.messages) == 1


async def test_retries_are_bounded(fake_api: Any) -> None:
    fake, adapter = make_adapter(fake_api, max_attempts=3)
    fake.fail_next("message.create", 10, status=500)
    with pytest.raises(DeliveryError):
        await adapter.deliver(card(), DeliveryTarget("channel", APPROVALS))
    assert len(fake.calls_to("message.create")) == 3


async def test_permanent_errors_are_not_retried(fake_api: Any) -> None:
    fake, adapter = make_adapter(fake_api)
    with pytest.raises(DeliveryError, match="230002"):
        await adapter.deliver(card(), DeliveryTarget("channel", "oc_bot_not_member"))
    assert len(fake.calls_to("message.create")) == 1


async def test_expired_token_is_refreshed_once(fake_api: Any) -> None:
    fake, adapter = make_adapter(fake_api)
    await adapter.deliver(card("r0"), DeliveryTarget("channel", APPROVALS))
    tokens_before = len(fake.calls_to("token"))
    fake.fail_next("message.create", 1, status=400, code=99991663)
    await adapter.deliver(card("r1"), DeliveryTarget("channel", APPROVALS))
    assert len(fake.calls_to("token")) == tokens_before + 1


async def test_uuid_dedupes_a_resend(fake_api: Any) -> None:
    fake, adapter = make_adapter(fake_api)
    target = DeliveryTarget("channel", APPROVALS)
    first = await adapter.deliver(card(), target)
    second = await adapter.deliver(card(), target)
    assert first == second
    assert fake.deduped_sends == 1
    assert len(fake.messages) == 1
    other = await adapter.deliver(card(), DeliveryTarget("user", ALICE))
    assert other.message_id != first.message_id


@pytest.mark.parametrize(
    ("target", "id_type"),
    [
        (DeliveryTarget("channel", APPROVALS), "chat_id"),
        (DeliveryTarget("user", ALICE), "open_id"),
        (DeliveryTarget("user", ALICE_EMAIL), "email"),
    ],
)
async def test_targets(fake_api: Any, target: DeliveryTarget, id_type: str) -> None:
    fake, adapter = make_adapter(fake_api)
    ref = await adapter.deliver(card(), target)
    call = fake.successful("message.create")[0]
    assert call.query["receive_id_type"] == id_type
    assert call.body["receive_id"] == target.id
    content = json.loads(call.body["content"])
    assert content["schema"] == "2.0" and content["config"]["update_multi"] is True
    assert ref.channel == (APPROVALS if target.kind == "channel" else f"oc_p2p_{ALICE}")


async def test_update_skips_older_versions(fake_api: Any) -> None:
    fake, adapter = make_adapter(fake_api)
    ref = await adapter.deliver(card(), DeliveryTarget("channel", APPROVALS))
    await adapter.update(card(version=3, status="cancelled", message="stop"), ref)
    await adapter.update(card(version=2), ref)
    assert len(fake.calls_to("message.patch")) == 1


async def test_update_failures_reach_the_engine_outbox(fake_api: Any) -> None:
    fake, adapter = make_adapter(fake_api)
    ref = await adapter.deliver(card(), DeliveryTarget("channel", APPROVALS))
    fake.fail_next("message.patch", 3, status=500)
    with pytest.raises(FeishuApiError):  # transient: the outbox retries later
        await adapter.update(card(version=2, status="cancelled", message="stop"), ref)
    assert len(fake.calls_to("message.patch")) == 3
    fake.fail_next("message.patch", 1, status=400, code=230001)
    with pytest.raises(DeliveryError):  # refused for good
        await adapter.update(card(version=2, status="cancelled", message="stop"), ref)
    await adapter.update(card(version=2, status="cancelled", message="stop"), ref)
    assert len(fake.successful("message.patch")) == 1


async def test_held_update_failure_is_raised_for_the_outbox(fake_api: Any) -> None:
    import asyncio

    fake, adapter = make_adapter(fake_api)
    ref = await adapter.deliver(card(), DeliveryTarget("channel", APPROVALS))
    fake.fail_next("message.patch", 3, status=500)
    adapter.hold("ref_1")
    update = asyncio.create_task(
        adapter.update(card(version=2, status="cancelled", message="stop"), ref))
    await asyncio.sleep(0.05)
    adapter.release("ref_1")
    with pytest.raises(FeishuApiError):  # the engine's outbox sees it and retries
        await update
    assert len(fake.calls_to("message.patch")) == 3


async def test_run_result_retry_is_deduped(fake_api: Any) -> None:
    fake, adapter = make_adapter(fake_api)
    origin = Origin("feishu", "oc_x", "om_start")
    fake.fail_next("message.reply", 3, status=500)
    with pytest.raises(FeishuApiError):
        await adapter.post_run_result(origin, "done")
    await adapter.post_run_result(origin, "done")
    uuids = {c.body["uuid"] for c in fake.calls_to("message.reply")}
    assert len(uuids) == 1


async def test_held_update_waits_for_release(fake_api: Any) -> None:
    import asyncio

    fake, adapter = make_adapter(fake_api)
    ref = await adapter.deliver(card(), DeliveryTarget("channel", APPROVALS))
    adapter.hold("ref_1")
    update = asyncio.create_task(
        adapter.update(card(version=2, status="cancelled", message="stop"), ref))
    await asyncio.sleep(0.1)
    assert not fake.calls_to("message.patch") and not update.done()
    adapter.release("ref_1")
    await asyncio.wait_for(update, 5)
    assert len(fake.successful("message.patch")) == 1


async def test_held_update_patches_after_the_hold_timeout(fake_api: Any) -> None:
    fake, url = fake_api
    adapter = FeishuAdapter(FeishuApi(make_config(url, fake.app_id)), hold_timeout=0.1)
    ref = await adapter.deliver(card(), DeliveryTarget("channel", APPROVALS))
    adapter.hold("ref_1")  # never released (e.g. the reply was lost)
    await adapter.update(card(version=2, status="cancelled", message="stop"), ref)
    assert len(fake.successful("message.patch")) == 1


async def test_run_result_is_a_thread_reply_without_mentions(fake_api: Any) -> None:
    fake, adapter = make_adapter(fake_api)
    origin = Origin("feishu", "oc_x", "om_start")
    await adapter.post_run_result(origin, 'done <at user_id="all"></at>')
    call = fake.successful("message.reply")[0]
    assert call.path.endswith("/om_start/reply")
    text = json.loads(call.body["content"])["text"]
    assert "<at" not in text and "done" in text
    assert plain_text("x" * 30_000).endswith("…")


INJECTION = ('done <at id=all></at> < at user_id="ou_1">x</at> @all '
             '[click](javascript:alert(1)) \x1b[2J\u202e <a href="https://evil">y</a>')


def _inert(text: str) -> None:
    """What a Feishu text message or toast must never carry (mentions, links, escapes)."""
    check_plain(text)
    assert "](" not in text and "\x1b" not in text and "\u202e" not in text


async def test_model_written_run_result_and_reminder_are_inert(fake_api: Any) -> None:
    """The agent's final output (model-written) is posted as a Feishu text message, which
    parses <at>, links and @all: none may survive, nor terminal escapes."""
    fake, adapter = make_adapter(fake_api)
    await adapter.post_run_result(Origin("feishu", "oc_x", "om_start"), INJECTION)
    delivered = await adapter.deliver(card(), DeliveryTarget("channel", APPROVALS))
    await adapter.remind(card(), delivered, INJECTION)
    texts = [json.loads(c.body["content"])["text"] for c in fake.successful("message.reply")]
    assert len(texts) == 2
    for text in texts:
        assert "done" in text and "click" in text
        _inert(text)


def test_toasts_and_replies_are_inert() -> None:
    shown = toast("error", "Already decided by " + INJECTION).toast
    assert shown is not None and shown.content is not None
    _inert(shown.content)
    _inert(plain_text(INJECTION))


async def test_permanent_delivery_failure_resolves_unavailable(feishu_http: Feishu) -> None:
    f = feishu_http
    f.fake.fail_next("message.create", 10, status=500)
    origin = await f.send_text("@_user_1 deploy: ship v5.0.0")
    answer = await f.wait_reply(origin)
    assert "Deployment of v5.0.0 not started" in answer
    assert "could not be delivered" in answer
    assert len(f.fake.calls_to("message.create")) == 3  # max_attempts in the harness
    assert "unavailable" in f.audit_events()


async def test_rate_limited_delivery_still_arrives(feishu_http: Feishu) -> None:
    f = feishu_http
    f.fake.fail_next("message.create", 2, status=429)
    await f.send_text("@_user_1 deploy: ship v5.0.1")
    card_message = await f.wait_card()
    assert await f.status(card_message) == "pending"
    assert len(f.fake.calls_to("message.create")) == 3


async def test_api_calls_reuse_pooled_connections(fake_api: Any) -> None:
    """lark-oapi's calls go through one pooled session, not a connection per call."""
    fake, adapter = make_adapter(fake_api)
    for i in range(4):
        await adapter.deliver(card(ref=f"ref_{i}"), DeliveryTarget("channel", APPROVALS))
    calls = fake.calls_to("message.create")
    peers = {c.peer for c in calls}
    assert len(calls) == 4 and None not in peers and len(peers) == 1
