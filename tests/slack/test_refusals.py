"""Refusals leave the request pending and unchanged, and are explained ephemerally."""

from __future__ import annotations

import time

import pytest

from tests.slack.conftest import ALICE, BOB, CAROL, MALLORY, STARTER, Slack


async def _pending_card(slack: Slack) -> str:
    assert (await slack.command("run deploy ship v1.0.0")).status_code == 200
    return await slack.wait_for_card()


def _assert_unchanged(slack: Slack, ts: str, blocks_before: list) -> None:
    row = slack.request_row()
    assert row.status == "pending" and row.decided_by_user is None
    assert not slack.fake.calls_to("chat.update")
    assert slack.card_message(ts).blocks == blocks_before


async def test_unauthorized_user_gets_ephemeral_refusal(slack: Slack) -> None:
    ts = await _pending_card(slack)
    before = slack.card_message(ts).blocks
    response = await slack.interact(slack.click_payload(ts, "Approve", MALLORY))
    assert response.status_code == 200
    await slack.wait_until(lambda: slack.ephemerals_to(MALLORY), what="ephemeral")
    assert "not allowed" in slack.ephemerals_to(MALLORY)[0]
    _assert_unchanged(slack, ts, before)
    assert ("respond_unauthorized", "refused", MALLORY) in slack.audit()


async def test_starter_cannot_approve_own_run(slack: Slack) -> None:
    ts = await _pending_card(slack)
    before = slack.card_message(ts).blocks
    await slack.interact(slack.click_payload(ts, "Approve", STARTER))
    await slack.wait_until(lambda: slack.ephemerals_to(STARTER), what="ephemeral")
    assert "yourself" in slack.ephemerals_to(STARTER)[0]
    _assert_unchanged(slack, ts, before)


@pytest.mark.parametrize("age", [0, 301])
async def test_bad_signature_or_stale_timestamp_is_401(slack: Slack, age: int) -> None:
    ts = await _pending_card(slack)
    before = slack.card_message(ts).blocks
    body = "payload=%7B%7D"
    stamp = str(int(time.time()) - age)
    headers = {"Content-Type": "application/x-www-form-urlencoded",
               "X-Slack-Request-Timestamp": stamp}
    if age == 0:
        headers["X-Slack-Signature"] = "v0=" + "0" * 64
    else:
        from slack_sdk.signature import SignatureVerifier

        from tests.slack.conftest import SIGNING_SECRET

        headers["X-Slack-Signature"] = SignatureVerifier(SIGNING_SECRET).generate_signature(
            timestamp=stamp, body=body)
    response = await slack.http.post(slack.url + "/slack/events", content=body, headers=headers)
    assert response.status_code == 401
    # a real click with a wrong signature is refused too, and changes nothing
    import json
    from urllib.parse import quote

    payload = "payload=" + quote(json.dumps(slack.click_payload(ts, "Approve", ALICE)), safe="")
    response = await slack.http.post(
        slack.url + "/slack/events", content=payload,
        headers={**headers, "X-Slack-Signature": "v0=" + "1" * 64},
    )
    assert response.status_code == 401
    _assert_unchanged(slack, ts, before)


async def test_tampered_reference_is_refused(slack: Slack) -> None:
    ts = await _pending_card(slack)
    before = slack.card_message(ts).blocks
    payload = slack.click_payload(ts, "Approve", ALICE, action_id="ah:forged-ref-123:approve")
    payload["actions"][0]["value"] = "ah:forged-ref-123:approve"
    await slack.interact(payload)
    await slack.wait_until(lambda: slack.ephemerals_to(ALICE), what="ephemeral")
    assert "does not exist" in slack.ephemerals_to(ALICE)[0]
    _assert_unchanged(slack, ts, before)
    assert ("respond_unknown_ref", "refused", ALICE) in slack.audit()


@pytest.mark.parametrize("action_id", ["something_else", "ahx:not-ours", "in"])
async def test_foreign_button_is_acked_and_changes_nothing(slack: Slack, action_id: str) -> None:
    """A block action askhuman does not own (another app's or a URL button, an input) is
    acked, not left to Bolt's 404 ("unhandled request"), which Slack shows the clicker as
    an error; and it decides nothing."""
    ts = await _pending_card(slack)
    before = slack.card_message(ts).blocks
    response = await slack.interact(
        slack.click_payload(ts, "Approve", ALICE, action_id=action_id))
    assert response.status_code == 200 and response.text == ""
    _assert_unchanged(slack, ts, before)
    assert not slack.ephemerals_to(ALICE)


async def test_action_not_offered_is_refused(slack: Slack) -> None:
    ts = await _pending_card(slack)
    before = slack.card_message(ts).blocks
    ref = slack.request_row().ref
    forged = f"ah:{ref}:deploy_everything"
    payload = slack.click_payload(ts, "Approve", ALICE, action_id=forged)
    payload["actions"][0]["value"] = forged
    await slack.interact(payload)
    await slack.wait_until(lambda: slack.ephemerals_to(ALICE), what="ephemeral")
    text = slack.ephemerals_to(ALICE)[0]
    assert "no action" in text and "deploy_everything" in text
    _assert_unchanged(slack, ts, before)
    assert ("respond_invalid", "refused", ALICE) in slack.audit()


@pytest.mark.parametrize("token", ["o7", "production-east", None])
async def test_option_not_offered_is_refused(slack: Slack, token: str | None) -> None:
    ts = await _pending_card(slack)
    before = slack.card_message(ts).blocks
    await slack.interact(slack.click_payload(ts, "Approve", ALICE, environment=token))
    await slack.wait_until(lambda: slack.ephemerals_to(ALICE), what="ephemeral")
    text = slack.ephemerals_to(ALICE)[0]
    if token is None:
        assert "Environment" in text and "required" in text
    else:
        assert "Environment" in text and "must be one of" in text
    _assert_unchanged(slack, ts, before)


@pytest.mark.parametrize("user", [BOB, CAROL])
async def test_group_and_channel_members_may_answer(slack: Slack, user: str) -> None:
    ts = await _pending_card(slack)
    await slack.interact(slack.click_payload(ts, "Reject", user, environment="o0"))
    await slack.wait_until(lambda: slack.fake.calls_to("chat.update"), what="chat.update")
    row = slack.request_row()
    assert row.status == "submitted" and row.decided_by_user == user


async def test_twenty_concurrent_clicks_give_one_decision(slack: Slack) -> None:
    import asyncio

    ts = await _pending_card(slack)
    users = [ALICE, BOB, CAROL] * 7
    clicks = [slack.click_payload(ts, "Approve", u) for u in users[:20]]
    responses = await asyncio.gather(*(slack.interact(c) for c in clicks))
    assert [r.status_code for r in responses] == [200] * 20
    await slack.wait_until(
        lambda: len(slack.fake.calls_to("chat.postEphemeral")) >= 19, what="19 refusals"
    )
    decided = [e for e in slack.audit() if e[0] == "decided"]
    assert len(decided) == 1
    assert len(slack.fake.calls_to("chat.update")) == 1
    refusals = [str(c.body["text"]) for c in slack.fake.calls_to("chat.postEphemeral")]
    assert all("already" in t.lower() or "decided" in t.lower() for t in refusals), refusals
    assert slack.request_row().status == "submitted"
