"""Authorization against the served Feishu app: a stale member list is never trusted
after its TTL, and only an agent's starters may start it (issue 9, items 5 and 7)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from bot.engine.authz import UNVERIFIED
from storage import AuditLog, Run
from tests.fakes.feishu_api import Message
from tests.feishu.conftest import (
    APPROVALS,
    CAROL,
    MALLORY,
    ORIGIN,
    STARTER,
    Feishu,
    toast_text,
)


def _refused(f: Feishu, event: str) -> list[tuple[str | None, str | None, dict[str, Any]]]:
    with f.database.transaction() as session:
        rows = session.scalars(select(AuditLog).where(AuditLog.event == event,
                                                      AuditLog.outcome == "refused"))
        return [(r.actor_user, r.reason, dict(r.details)) for r in rows]


def _runs(f: Feishu) -> int:
    with f.database.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(Run)) or 0)


async def _click(f: Feishu, card: Message, operator: str) -> str | None:
    """Why ``operator``'s click was not taken: its error toast, or what they were told
    after a "received" toast (None: taken)."""
    before = len(f.told(operator)) + len(f.told_here(operator))
    response = await f.click(card, operator=operator)
    if response.json()["toast"]["type"] == "error":
        return toast_text(response)
    told = (f.told(operator) + f.told_here(operator))[before:]
    return told[-1] if told else None


async def test_member_list_lookup_failing_after_ttl_fails_closed(feishu_http: Feishu) -> None:
    f = feishu_http
    now = [0.0]
    f.platform.directory.clock = lambda: now[0]
    await f.send_text("@_user_1 deploy: ship v1")
    first = await f.wait_card()
    await f.send_text("@_user_1 deploy: ship v2")
    second = await f.wait_card()
    assert "not allowed" in str(await _click(f, first, MALLORY))  # caches the list
    lookups = len(f.fake.calls_to("chat_members.get"))

    f.fake.chats[APPROVALS] = [STARTER]  # Carol is removed from the chat...
    f.fake.fail_next("chat_members.get", 3, status=429)  # ...and Feishu rate limits us
    now[0] = 30.0  # the cached list is fresh: it is used as is, nobody is asked
    assert await _click(f, first, CAROL) is None  # taken: the card says it
    assert await f.status(first) == "submitted"
    assert len(f.fake.calls_to("chat_members.get")) == lookups

    now[0] = 61.0  # expired: the failed lookup refuses instead of reusing the old list
    told = await _click(f, second, CAROL)
    assert told is not None and told.endswith(str(UNVERIFIED))
    assert await f.status(second) == "pending"
    assert (CAROL, str(UNVERIFIED)) in [(u, r) for u, r, _ in _refused(f, "respond_unauthorized")]
    assert len(f.fake.calls_to("chat_members.get")) == lookups + 3  # every retry failed

    told = await _click(f, second, CAROL)  # Feishu answers again: Carol is gone
    assert "not allowed" in str(told)
    assert await f.status(second) == "pending"


async def test_stranger_message_does_not_start_a_run(feishu_http: Feishu) -> None:
    f = feishu_http
    message_id = await f.send_text("@_user_1 deploy: ship v3", user=MALLORY)
    reply = await f.wait_reply(message_id)
    assert reply == ("You are not allowed to start 'deploy'. An admin can add you under "
                     "agents.deploy.starters.feishu.")
    assert _runs(f) == 0
    assert not [m for m in f.fake.messages.values() if m.msg_type == "interactive"]
    assert [(u, d["check"]) for u, _, d in _refused(f, "run_start_refused")] == [
        (MALLORY, "not_a_starter")]


async def test_help_and_unknown_agent_list_only_startable_agents(feishu_http: Feishu) -> None:
    f = feishu_http
    mine = await f.wait_reply(await f.send_text("@_user_1 hello"))
    assert mine.endswith("Agents you may start: deploy, upload.")
    theirs = await f.wait_reply(await f.send_text("@_user_1 hello", user=MALLORY))
    assert "Agents you may start" not in theirs and "You may not start any agent" in theirs
    unknown = await f.wait_reply(await f.send_text("@_user_1 nosuch: x", user=MALLORY,
                                                   chat_id=ORIGIN))
    assert unknown == ("Unknown agent 'nosuch', and you may not start any agent; ask an "
                       "admin to add you to an agent's starters.")
    assert [d["check"] for _, _, d in _refused(f, "run_start_refused")] == ["unknown_agent"]
