"""Refused callbacks: after each one the request is still pending and nothing is patched."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.fakes.feishu_api import Message
from tests.fakes.feishu_signing import encrypt, sign_event, signature
from tests.feishu.conftest import ALICE, ENCRYPT_KEY, MALLORY, Feishu, card_ref


async def _pending_card(f: Feishu) -> Message:
    await f.send_text("@_user_1 deploy: ship v9.9.9")
    card = await f.wait_card()
    assert await f.status(card) == "pending"
    return card


async def _still_pending(f: Feishu, card: Message) -> None:
    assert await f.status(card) == "pending"
    assert not card.patches
    assert not f.fake.calls_to("message.patch")


async def test_unauthorized_operator_gets_error_toast(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    response = await f.post_event(f.click_event(card, operator=MALLORY))
    assert response.status_code == 200
    toast = response.json()["toast"]
    assert toast["type"] == "error"
    assert "not allowed" in toast["content"]
    await _still_pending(f, card)
    assert "respond_unauthorized" in f.audit_events()


async def test_invalid_value_gets_error_toast(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    response = await f.post_event(f.click_event(card, form_value={"f_environment": "o99"}))
    assert response.json()["toast"]["type"] == "error"
    await _still_pending(f, card)
    assert "respond_invalid" in f.audit_events()


async def test_already_decided_gets_error_toast(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    first = await f.post_event(f.click_event(card))
    assert first.json()["toast"]["type"] == "success"
    second = await f.post_event(f.click_event(card, action="reject"))
    toast = second.json()["toast"]
    assert toast["type"] == "error" and "Already decided" in toast["content"]
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
    assert first.json()["toast"]["type"] == "error"
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
    assert first.json()["toast"]["type"] == "error"
    # A different (validly signed) event reusing the nonce: a replay.
    replay = await f.post_event(f.click_event(card), nonce=nonce)
    assert replay.status_code == 401
    await _still_pending(f, card)


async def test_exact_replay_of_a_captured_request_is_rejected(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    captured = sign_event(f.click_event(card, operator=MALLORY), ENCRYPT_KEY)
    assert (await f.post_signed(captured)).json()["toast"]["type"] == "error"
    assert (await f.post_signed(captured)).status_code == 401
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
    response = await f.post_event(f.click_event(card, ref="forged-ref"))
    assert response.json()["toast"]["type"] == "error"
    # A real ref, but not the one this card carries (click on card A deciding B).
    response = await f.post_event(f.click_event(card, ref=card_ref(other)))
    assert response.json()["toast"]["type"] == "error"
    # A real ref, claimed from a message that is not one of our cards.
    event = f.click_event(card)
    event["event"]["context"]["open_message_id"] = "om_somewhere_else"
    response = await f.post_event(event)
    assert response.json()["toast"]["type"] == "error"
    # Malformed callback value.
    event = f.click_event(card)
    event["event"]["action"]["value"] = {"r": "", "a": "approve; drop"}
    response = await f.post_event(event)
    assert response.json()["toast"]["type"] == "error"
    await _still_pending(f, card)
    assert await f.status(other) == "pending"


async def test_alice_still_can_decide_after_refusals(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    await f.post_event(f.click_event(card, operator=MALLORY))
    response = await f.post_event(f.click_event(card, operator=ALICE))
    assert response.json()["toast"]["type"] == "success"
    await f.wait_patch(card)
