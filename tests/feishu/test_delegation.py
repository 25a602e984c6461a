"""The Feishu ``delegate`` bot command: Bob hands his approvals to Dave by @-mention;
Dave's click decides "for" Bob; after ``delegate revoke`` it is refused, with words."""

from __future__ import annotations

from sqlalchemy import select

from storage import Delegation, HumanRequest
from tests.fakes.feishu_signing import bot_mention
from tests.feishu.conftest import BOB, Feishu, toast_text

DAVE = "ou_dave"  # not an approver: only through Bob's delegation


def dave_mention() -> dict[str, object]:
    return {"key": "@_user_2", "id": {"open_id": DAVE, "union_id": "on_dave"},
            "name": "Dave Li", "tenant_key": "tenant_test"}


async def test_delegate_by_mention_then_revoke(feishu_http: Feishu) -> None:
    f = feishu_http
    asked = await f.send_text("@_user_1 delegate @_user_2 until 2099-01-01", user=BOB,
                              mentions=[bot_mention(), dave_mention()])
    said = await f.wait_reply(asked)
    assert said.startswith("Until 2099-01-01 00:00 UTC, Dave Li may answer"), said
    listed = await f.send_text("delegate list", user=BOB, chat_id="oc_p2p_bob",
                               chat_type="p2p", mentions=[])
    assert "You → Dave Li until 2099-01-01 00:00 UTC" in await f.wait_reply(listed)

    await f.send_text("@_user_1 deploy: ship v3.1.0")
    card = await f.wait_card()
    response = await f.post_event(f.click_event(card, operator=DAVE))
    assert response.status_code == 200
    patched = str(await f.wait_patch(card))
    assert f"<at id={DAVE}></at> for <at id={BOB}></at>" in patched  # Feishu shows names
    assert await f.status(card) == "submitted"
    with f.database.transaction() as session:
        row = session.scalars(select(HumanRequest)).one()
        assert (row.decided_by_user, row.decided_via) == (BOB, DAVE)
    assert "delegation_added" in f.audit_events()

    revoked = await f.send_text("/delegate revoke", user=BOB, chat_id="oc_p2p_bob",
                                chat_type="p2p", mentions=[])
    assert (await f.wait_reply(revoked)).startswith("Revoked 1 delegation(s)")
    await f.send_text("@_user_1 deploy: ship v3.1.1")
    second = await f.wait_card()
    refused = await f.click(second, expect="error", operator=DAVE)  # said in the toast
    assert "Your delegation from" in toast_text(refused)
    assert "was revoked" in toast_text(refused)
    assert await f.status(second) == "pending"


async def test_unknown_person_is_explained(feishu_http: Feishu) -> None:
    f = feishu_http
    asked = await f.send_text("delegate @nobody until 2099-01-01", user=BOB,
                              chat_id="oc_p2p_bob", chat_type="p2p", mentions=[])
    assert "can't tell who @nobody is" in await f.wait_reply(asked)


async def test_delegate_named_by_email_is_looked_up_in_the_directory(feishu_http: Feishu) -> None:
    """An email is resolved to an open_id through the Feishu directory (the engine's
    ``directory``), so the delegation names the right person."""
    f = feishu_http
    f.fake.users["dave@example.com"] = DAVE
    asked = await f.send_text("delegate dave@example.com until 2099-01-01", user=BOB,
                              chat_id="oc_p2p_bob", chat_type="p2p", mentions=[])
    said = await f.wait_reply(asked)
    assert said.startswith("Until 2099-01-01 00:00 UTC,"), said
    with f.database.transaction() as session:
        [row] = session.scalars(select(Delegation)).all()
        assert (row.from_user, row.to_user) == (BOB, DAVE)
    unknown = await f.send_text("delegate nobody@example.com until 2099-01-01", user=BOB,
                                chat_id="oc_p2p_bob", chat_type="p2p", mentions=[])
    assert "can't tell who nobody@example.com is" in await f.wait_reply(unknown)
