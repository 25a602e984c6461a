"""Refused callbacks: after each one the request is still pending and nothing is patched.

Transport refusals (signature, replay, shape) are answered in the HTTP reply; a click
the engine refuses (unauthorized, invalid, late, wrong card) gets an error toast saying
why, where the person clicked; nobody is sent a private message about it."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.fakes.feishu_api import Message
from tests.fakes.feishu_signing import encrypt, sign_event, signature
from tests.feishu.conftest import (
    ALICE,
    BOB,
    ENCRYPT_KEY,
    MALLORY,
    Feishu,
    card_ref,
    toast_text,
)


async def _pending_card(f: Feishu) -> Message:
    await f.send_text("@_user_1 deploy: ship v9.9.9")
    card = await f.wait_card()
    assert await f.status(card) == "pending"
    return card


async def _still_pending(f: Feishu, card: Message) -> None:
    assert await f.status(card) == "pending"
    assert not card.patches
    assert not f.fake.calls_to("message.patch")


async def test_unauthorized_operator_reads_why_in_the_toast(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    response = await f.click(card, expect="error", operator=MALLORY)
    assert "not allowed" in toast_text(response)
    await _still_pending(f, card)
    assert "respond_unauthorized" in f.audit_events()
    assert f.told(MALLORY) == f.told(ALICE) == []  # nobody is messaged about it


async def test_invalid_value_is_refused_in_the_toast(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    response = await f.click(card, expect="error", form_value={"f_environment": "o99"})
    assert "must be one of" in toast_text(response)
    assert f.told(ALICE) == []
    await _still_pending(f, card)
    assert "respond_invalid" in f.audit_events()


async def test_late_click_is_refused_in_the_toast(feishu_http: Feishu) -> None:
    f = feishu_http
    card = await _pending_card(f)
    await f.click(card, expect="success")
    assert await f.status(card) == "submitted"
    late = await f.click(card, expect="error", operator=BOB, action="reject")
    assert "Already decided" in toast_text(late)
    assert f.told(ALICE) == f.told(BOB) == []
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
    assert first.json()["toast"]["type"] == "error"  # refused: the environment is required
    await f.settle()
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
    await f.settle()
    assert f.audit_events().count("respond_unauthorized") == 1  # once, not per replay
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
    forged = await f.click(card, expect="error", ref="forged-ref")
    # A real ref, but not the one this card carries (click on card A deciding B).
    swapped = await f.click(card, expect="error", ref=card_ref(other))
    # A real ref, claimed from a message that is not one of our cards.
    event = f.click_event(card)
    event["event"]["context"]["open_message_id"] = "om_somewhere_else"
    elsewhere = await f.post_event(event)
    assert elsewhere.json()["toast"]["type"] == "error"
    assert "does not match" in toast_text(forged) and "does not match" in toast_text(swapped)
    assert "not active" in toast_text(elsewhere)
    await f.settle()
    assert f.told(ALICE) == []
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
    await f.click(card, expect="error", operator=MALLORY)
    await f.click(card, expect="success", operator=ALICE)
    await f.wait_patch(card)
    assert await f.status(card) == "submitted"
