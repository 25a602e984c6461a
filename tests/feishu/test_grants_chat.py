"""Feishu ``grants``: a card 2.0 listing the standing grants the sender may revoke, with
Revoke buttons. A click gets a toast that says what happened (an error toast with the
reason on refusal), in the card's language, and the list card is patched after it;
over HTTP callbacks and over the long connection."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from bot.engine.ports import Identity
from tests.fakes.feishu_api import FakeFeishuApi, Message
from tests.fakes.feishu_signing import card_action_event, message_event
from tests.feishu.conftest import (
    ALICE,
    BOB,
    MALLORY,
    ORIGIN,
    VERIFICATION_TOKEN,
    Feishu,
    _engine,
    served,
)
from tests.feishu.test_ws import feed, toast_of
from tests.renderers.helpers import assert_feishu_no_pings, assert_valid_feishu, walk
from tests.slack.test_grants_chat import add_grant

Opened = Callable[[str], AbstractAsyncContextManager[Feishu]]


@pytest.fixture
def system(tmp_path: Path, fake_api: tuple[FakeFeishuApi, str]) -> Opened:
    """``async with system(locale) as f``: the served app with HTTP callbacks."""

    def make(locale: str = "en") -> AbstractAsyncContextManager[Feishu]:
        class Served:
            async def __aenter__(self) -> Feishu:
                engine, database, settings = _engine(tmp_path, locale=locale)
                self._cm = served(fake_api, engine, database, settings)
                f = await self._cm.__aenter__()
                await f.platform.directory.warm_up(f.platform.approver_entries)
                return f

            async def __aexit__(self, *exc: Any) -> None:
                await self._cm.__aexit__(*exc)

        return Served()

    return make


@pytest.fixture
async def feishu(system: Opened) -> AsyncIterator[Feishu]:
    async with system("en") as f:
        yield f


def make_grant(f: Feishu, args: dict[str, Any] | None = None) -> int:
    return add_grant(f.database, f.engine.ctx.now(), args=args,
                     by=Identity("feishu", BOB, "Bob Li"))


async def ask(f: Feishu, user: str, text: str = "grants") -> Message:
    """Send ``text`` in the sender's direct chat with the bot; the card it gets back."""
    where = {"chat_id": f"oc_p2p_{user}", "chat_type": "p2p", "mentions": []}
    if f.http is not None:
        asked = await f.send_text(text, user=user, **where)
    else:  # the long connection
        event = message_event(token=VERIFICATION_TOKEN, sender=user, text=text,
                              app_id=f.fake.app_id, **where)
        assert await feed(f, event) is None
        asked = str(event["event"]["message"]["message_id"])
    return await wait_card(f, lambda m: m.parent_id == asked)


async def wait_card(f: Feishu, where: Callable[[Message], bool]) -> Message:
    async def found() -> Message | None:
        return next((m for m in list(f.fake.messages.values())
                     if m.msg_type == "interactive" and where(m)), None)

    for _ in range(500):
        if (card := await found()) is not None:
            return card
        await f.settle()
        await asyncio.sleep(0.02)
    raise AssertionError("no grants card")


def revokes(card: dict[str, Any]) -> list[dict[str, Any]]:
    return [b["behaviors"][0]["value"] for b in walk(card) if b.get("tag") == "button"]


def text_of(card: dict[str, Any]) -> str:
    """The card's body text (the header, its title, is not part of it)."""
    return "\n".join(d["content"] for d in walk(card["body"]) if d.get("tag") == "plain_text")


def revoke_event(f: Feishu, card: Message, operator: str, grant_id: int,
                 locale: str = "en") -> dict[str, Any]:
    return card_action_event(token=VERIFICATION_TOKEN, operator=operator,
                             value={"g": grant_id, "l": locale}, message_id=card.message_id,
                             chat_id=card.chat_id, app_id=f.fake.app_id,
                             button_name=f"g_{grant_id}")


async def revoke(f: Feishu, card: Message, operator: str, grant_id: int,
                 locale: str = "en") -> dict[str, Any]:
    response = await f.post_event(revoke_event(f, card, operator, grant_id, locale))
    assert response.status_code == 200, response.text
    await f.settle()
    return dict(response.json()["toast"])


async def active(f: Feishu, grant_id: int) -> bool:
    found = await f.engine.grant(grant_id)
    assert found is not None
    return found.active


async def test_grants_lists_to_approvers_only(feishu: Feishu) -> None:
    f = feishu
    grant_id = make_grant(f)
    card = await ask(f, BOB)
    shown = card.card()
    assert_valid_feishu(shown)
    assert revokes(shown) == [{"g": grant_id, "l": "en"}]
    text = text_of(shown)
    assert f"G-{grant_id}: deploy may run restart_service with the exact same arguments" in text
    assert "Granted for: service=web" in text and "granted by Bob Li" in text
    assert "10 of 10 uses left" in text and "until " in text
    nothing = (await ask(f, MALLORY, "/grants")).card()
    assert revokes(nothing) == []
    assert "No active standing grants on the routes you may answer." in text_of(nothing)


async def test_grants_in_a_group_goes_to_the_direct_chat(feishu: Feishu) -> None:
    f = feishu
    grant_id = make_grant(f)
    asked = await f.send_text("@_user_1 grants", user=ALICE)  # an approver by email
    assert await f.wait_reply(asked) == "I sent you the standing grants in our direct chat."
    direct = await wait_card(f, lambda m: m.chat_id == f"oc_p2p_{ALICE}")
    assert revokes(direct.card()) == [{"g": grant_id, "l": "en"}]
    assert not [m for m in f.fake.messages.values()
                if m.chat_id == ORIGIN and m.msg_type == "interactive"]


async def test_revoke_toasts_the_truth_and_patches_the_list(feishu: Feishu) -> None:
    f = feishu
    grant_id = make_grant(f)
    kept = make_grant(f, {"service": "db"})
    card = await ask(f, BOB)

    refused = await revoke(f, card, MALLORY, grant_id)
    assert refused["type"] == "error"
    assert refused["content"].startswith(f"You may not revoke G-{grant_id}: You are not "
                                         "allowed")
    assert refused["i18n"]["zh_cn"].startswith(f"你不能撤销 G-{grant_id}：")
    assert card.patches == [] and await active(f, grant_id)

    done = await revoke(f, card, BOB, grant_id)
    assert done == {"type": "success", "content": f"Revoked standing grant G-{grant_id}; "
                    "matching calls get a card again.", "i18n": done["i18n"]}
    assert not await active(f, grant_id) and await active(f, kept)
    patched = await f.wait_patch(card)
    assert_valid_feishu(patched)
    assert text_of(patched).startswith(f"Revoked standing grant G-{grant_id}")
    assert revokes(patched) == [{"g": kept, "l": "en"}]

    again = await revoke(f, card, BOB, grant_id)
    assert again["type"] == "info"
    assert again["content"] == f"Standing grant G-{grant_id} was already revoked or has run out."
    assert f.audit_events().count("grant_revoked") == 1


async def test_zh_cn_card_and_toasts(system: Opened) -> None:
    async with system("zh-CN") as f:
        grant_id = make_grant(f)
        card = await ask(f, BOB, "/grants")
        shown = card.card()
        assert shown["header"]["title"]["content"] == "你可以撤销的长期授权（1 个）："
        assert revokes(shown) == [{"g": grant_id, "l": "zh-CN"}]
        assert "授权人 Bob Li" in text_of(shown) and "剩余 10/10 次" in text_of(shown)
        refused = await revoke(f, card, MALLORY, grant_id, "zh-CN")
        assert refused["type"] == "error" and refused["content"].startswith("你不能撤销")
        done = await revoke(f, card, BOB, grant_id, "zh-CN")
        assert done["type"] == "success"
        assert done["content"] == (f"已撤销长期授权 G-{grant_id}，"
                                   "之后匹配的调用将重新发送审批卡片。")
        patched = await f.wait_patch(card)
        assert text_of(patched).startswith(f"已撤销长期授权 G-{grant_id}")


async def test_model_written_arguments_stay_inert(feishu: Feishu) -> None:
    f = feishu
    make_grant(f, {"note": "<at id=all></at> @all", "md": "[x](javascript:alert(1))"})
    shown = (await ask(f, BOB)).card()
    assert_valid_feishu(shown)
    assert_feishu_no_pings(shown)
    assert "<at id=all>" not in json.dumps(shown, ensure_ascii=False)
    assert not [d for d in walk(shown) if d.get("tag") in ("markdown", "lark_md")]


async def test_a_replayed_revoke_is_answered_once(feishu: Feishu) -> None:
    f = feishu
    grant_id = make_grant(f)
    card = await ask(f, BOB)
    event = revoke_event(f, card, BOB, grant_id)
    first = await f.post_event(event)
    assert first.json()["toast"]["type"] == "success"
    again = await f.post_event(event)  # the same event id, freshly signed
    assert again.status_code == 200 and "toast" not in again.json()
    assert f.audit_events().count("grant_revoked") == 1


async def test_long_connection_revoke(feishu_ws: Feishu) -> None:
    f = feishu_ws
    grant_id = make_grant(f)
    card = await ask(f, BOB)
    refused = toast_of(await feed(f, revoke_event(f, card, MALLORY, grant_id)))
    assert refused["type"] == "error" and "You may not revoke" in refused["content"]
    done = toast_of(await feed(f, revoke_event(f, card, BOB, grant_id)))
    assert done["type"] == "success", done
    assert done["content"].startswith(f"Revoked standing grant G-{grant_id}")
    patched = await f.wait_patch(card)
    assert revokes(patched) == []
    assert not await active(f, grant_id)


async def test_failures_are_told_never_silent(feishu: Feishu,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    f = feishu
    grant_id = make_grant(f)
    card = await ask(f, BOB)
    # Sending the list to the direct chat fails for good: the group is told so.
    f.fake.fail_next("message.create", 3, status=400, code=230002)
    asked = await f.send_text("@_user_1 grants", user=ALICE)
    assert await f.wait_reply(asked) == ("I couldn't list the standing grants just now; "
                                         "please try again shortly.")

    async def broken(*_: Any) -> Any:
        raise RuntimeError("the grants table is gone")

    monkeypatch.setattr(f.engine, "revoke_grant", broken)
    failed = await revoke(f, card, BOB, grant_id)
    assert failed == {"type": "error", "content": "Something went wrong; please try again.",
                      "i18n": failed["i18n"]}
    assert card.patches == [] and await active(f, grant_id)
    monkeypatch.setattr(f.engine, "active_grants", broken)
    asked = await f.send_text("grants", user=BOB, chat_id=f"oc_p2p_{BOB}", chat_type="p2p",
                              mentions=[])
    assert await f.wait_reply(asked) == ("I couldn't list the standing grants just now; "
                                         "please try again shortly.")
