"""Refused callbacks: after each one the request is still pending and nothing is patched.

Transport refusals (signature, replay, shape) are answered in the HTTP reply; a stored
click the engine refuses (unauthorized, invalid, late, wrong card) gets the "received"
toast and then a private message saying why."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.fakes.feishu_api import Message
from tests.fakes.feishu_signing import encrypt, sign_event, signature
from tests.feishu.conftest import ALICE, BOB, ENCRYPT_KEY, MALLORY, RECEIVED, Feishu, card_ref


async def _pending_card(f: Feishu) -> Message:
    await f.send_text("@_user_1 deploy: ship v9.9.9")
    card = await f.wait_card()
    assert await f.status(card) == "pending"
    return card


async def _still_pending(f: Feishu, card: Message) -> None:
    assert await f.status(card) == "pending"
    assert not card.patches
    assert not f.fake.calls_to("message.patch")


async def test_unauthorized_operator_is_told_privately(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    await f.click(card, operator=MALLORY)
    [told] = f.told(MALLORY)
    assert "not allowed" in told
    await _still_pending(f, card)
    assert "respond_unauthorized" in f.audit_events()
    assert f.told(ALICE) == []  # nobody else hears about it


async def test_invalid_value_is_told_privately(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    await f.click(card, form_value={"f_environment": "o99"})
    [told] = f.told(ALICE)
    assert "must be one of" in told, told
    await _still_pending(f, card)
    assert "respond_invalid" in f.audit_events()


async def test_late_click_is_told_privately(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    await f.click(card)
    assert await f.status(card) == "submitted"
    assert f.told(ALICE) == []  # the card shows the winner's answer to everyone
    await f.click(card, operator=BOB, action="reject")
    [told] = f.told(BOB)
    assert "Already decided" in told
    assert await f.status(card) == "submitted"


async def test_bad_signature_is_rejected(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    signed = sign_event(f.click_event(card), ENCRYPT_KEY)
    headers = {**signed.headers, "X-Lark-Signature": "0" * 64}
    response = await f.http.post(f.url + "/feishu/events", content=signed.body,  # type: ignore[union-attr]
                                 headers=headers)
    assert response.status_code == 401
    # Signed with the wrong key.
    wrong = sign_event(f.click_event(card), "not-the-key")
    assert (await f.post_signed(wrong)).status_code == 401
    await _still_pending(f, card)


async def test_missing_signature_is_rejected(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    body = json.dumps({"encrypt": encrypt(json.dumps(f.click_event(card)).encode(),
                                          ENCRYPT_KEY)}).encode()
    response = await f.http.post(f.url + "/feishu/events", content=body)  # type: ignore[union-attr]
    assert response.status_code == 401
    await _still_pending(f, card)


async def test_undecryptable_body_is_rejected(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    for body in (
        json.dumps({"encrypt": "bm90IGEgcmVhbCBjaXBoZXJ0ZXh0IGF0IGFsbCEh"}).encode(),
        json.dumps({"encrypt": encrypt(b"{not json", ENCRYPT_KEY)}).encode(),
        b"not json at all",
    ):
        ts, nonce = str(int(time.time())), uuid.uuid4().hex
        headers = {
            "X-Lark-Request-Timestamp": ts,
            "X-Lark-Request-Nonce": nonce,
            "X-Lark-Signature": signature(ts, nonce, ENCRYPT_KEY, body),
        }
        response = await f.http.post(f.url + "/feishu/events", content=body,  # type: ignore[union-attr]
                                     headers=headers)
        assert response.status_code == 400, body
    await _still_pending(f, card)


async def test_wrong_verification_token_is_rejected(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    event = f.click_event(card)
    event["header"]["token"] = "forged-token"
    response = await f.post_event(event)
    assert response.status_code == 401
    await _still_pending(f, card)


async def test_replayed_event_id_is_ignored(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    event_id = uuid.uuid4().hex
    # First delivery carries an invalid value: refused, but the event id is now known.
    first = await f.post_event(f.click_event(card, form_value={}, event_id=event_id))
    assert first.json()["toast"] == RECEIVED
    await f.settle()
    assert len(f.told(ALICE)) == 1  # refused: the environment is required
    # Same event id (new nonce, valid values): a duplicate, ignored entirely.
    again = await f.post_event(f.click_event(card, event_id=event_id))
    assert again.status_code == 200
    assert again.json() == {}
    await _still_pending(f, card)


async def test_replayed_nonce_is_rejected(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    nonce = uuid.uuid4().hex
    first = await f.post_event(f.click_event(card, operator=MALLORY), nonce=nonce)
    assert first.json()["toast"] == RECEIVED
    # A different (validly signed) event reusing the nonce: a replay.
    replay = await f.post_event(f.click_event(card), nonce=nonce)
    assert replay.status_code == 401
    await _still_pending(f, card)


async def test_exact_replay_of_a_captured_request_is_rejected(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    captured = sign_event(f.click_event(card, operator=MALLORY), ENCRYPT_KEY)
    assert (await f.post_signed(captured)).json()["toast"] == RECEIVED
    assert (await f.post_signed(captured)).status_code == 401
    await f.settle()
    assert len(f.told(MALLORY)) == 1  # told once, not once per replay
    await _still_pending(f, card)


@pytest.mark.parametrize("age", [600, -600])
async def test_stale_timestamp_is_rejected(feishu_http: Feishu, age: int) -> None:
    f = feishu_http
    card = await _pending_card(f)
    old = str(int(time.time()) - age)
    response = await f.post_event(f.click_event(card), timestamp=old)
    assert response.status_code == 401
    await _still_pending(f, card)


async def test_stale_event_create_time_is_refused(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    old_ms = str(int((time.time() - 3600) * 1000))
    response = await f.post_event(f.click_event(card, create_time=old_ms))
    assert response.json()["toast"]["type"] == "error"
    await _still_pending(f, card)


async def test_tampered_request_reference_is_refused(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    await f.send_text("@_user_1 deploy: ship v9.9.10")
    other = await f.wait_card()
    # Unknown ref on a real card.
    await f.click(card, ref="forged-ref")
    # A real ref, but not the one this card carries (click on card A deciding B).
    await f.click(card, ref=card_ref(other))
    # A real ref, claimed from a message that is not one of our cards.
    event = f.click_event(card)
    event["event"]["context"]["open_message_id"] = "om_somewhere_else"
    assert (await f.post_event(event)).json()["toast"] == RECEIVED
    await f.settle()
    told = f.told(ALICE)
    assert len(told) == 3
    assert "does not match" in told[0] and "does not match" in told[1]
    assert "not active" in told[2]
    # Malformed callback value: refused in the reply itself.
    event = f.click_event(card)
    event["event"]["action"]["value"] = {"r": "", "a": "approve; drop"}
    response = await f.post_event(event)
    assert response.json()["toast"]["type"] == "error"
    await _still_pending(f, card)
    assert await f.status(other) == "pending"


async def test_alice_still_can_decide_after_refusals(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    await f.click(card, operator=MALLORY)
    await f.click(card, operator=ALICE)
    await f.wait_patch(card)
    assert await f.status(card) == "submitted"
