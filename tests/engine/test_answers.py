"""Invalid answers and unauthorized people are refused; only an audit row is added."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from bot.engine import Identity
from storage import AuditLog, HumanRequest, Vote
from tests.engine.helpers import FORM_ARGS, ORIGIN, STARTER, AskingRuntime, alice, make_engine

FILE = {"platform": "feishu", "id": "f1", "name": "a.log", "mimetype": "text/plain",
        "size": 10, "url": None}


def _state(engine: Any) -> tuple[list[dict[str, Any]], int, int]:
    with engine.db.transaction() as s:
        rows = [{c.name: getattr(r, c.name) for c in HumanRequest.__table__.columns}
                for r in s.scalars(select(HumanRequest))]
        votes = int(s.scalar(select(func.count()).select_from(Vote)) or 0)
        audits = int(s.scalar(select(func.count()).select_from(AuditLog)) or 0)
    return rows, votes, audits


async def _form(db_url: str, route: dict[str, Any] | None = None, **kw: Any) -> Any:
    engine, adapter, _ = make_engine(db_url, route=route, fake=AskingRuntime(FORM_ARGS),
                                  **kw)
    await engine.start_run("form", "go", STARTER, ORIGIN)
    return engine, adapter, adapter.delivered[0][0].ref


@pytest.mark.parametrize(("action", "values", "reason"), [
    ("deploy", {"environment": "staging"},
     "This request has no action \u201cdeploy\u201d; "
     "choose \u201cApprove\u201d, \u201cReject\u201d"),
    ("approve", {"environment": "moon"},
     "\u201cEnvironment\u201d must be one of: staging, production"),
    ("approve", {}, "\u201cEnvironment\u201d is required"),
    ("approve", {"environment": "staging", "amount": "12 dollars"},
     "\u201cAmount\u201d must be a number"),
    ("approve", {"environment": "staging", "amount": "501"},
     "\u201cAmount\u201d must be at most 500"),
    ("approve", {"environment": "staging", "color": "red"},
     "This request has no field \u201ccolor\u201d"),
    ("approve", {"environment": "staging", "logs": [FILE, FILE, FILE]},
     "\u201cLogs\u201d accepts at most 2 file(s)"),
])
async def test_bad_values_leave_request_unchanged(
    db_url: str, action: str, values: dict[str, Any], reason: str
) -> None:
    engine, adapter, ref = await _form(db_url)
    before = _state(engine)
    res = await engine.respond(ref, alice(), action, values)
    assert (res.outcome, res.message) == ("rejected", reason)
    after = _state(engine)
    assert after[0] == before[0] and after[1] == before[1] and after[2] == before[2] + 1
    assert adapter.updates == []


async def test_unauthorized_and_self_approval_are_refused(db_url: str) -> None:
    engine, _, ref = await _form(db_url)
    before = _state(engine)
    eve = await engine.respond(ref, Identity("slack", "U_EVE"), "approve", {"environment": "x"})
    assert (eve.outcome, eve.message) == ("rejected", "You are not allowed to answer this request.")
    own = await engine.respond(ref, STARTER, "approve", {"environment": "staging"})
    assert own.outcome == "rejected" and "cannot approve it yourself" in own.message
    feishu = await engine.respond(ref, Identity("feishu", "U_ALICE"), "approve", {})
    assert feishu.outcome == "rejected"
    after = _state(engine)
    assert after[0] == before[0] and after[2] == before[2] + 3


async def test_groups_channel_members_and_self_approval_setting(db_url: str) -> None:
    from tests.engine.helpers import FakeDirectory

    route = {"timeout": 60, "allow_self_approval": True,
             "slack": {"channel": "C_OPS", "users": ["U_DM"],
                       "approvers": {"groups": ["S_SRE"], "channel_members": True}}}
    directory = FakeDirectory(groups={"S_SRE": {"U_GROUP"}}, chats={"C_OPS": {"U_MEMBER"}})
    engine, adapter, ref = await _form(db_url, route, directory=directory)
    assert [t.id for _, t in adapter.delivered] == ["C_OPS", "U_DM"]
    assert [c.ref for c in await engine.pending_for(Identity("slack", "U_MEMBER"))] == [ref]
    assert [c.ref for c in await engine.pending_for(STARTER)] == []
    directory.groups["S_SRE"].add(STARTER.user_id)
    assert [c.ref for c in await engine.pending_for(STARTER)] == [ref]
    res = await engine.respond(ref, Identity("slack", "U_GROUP"), "approve",
                               {"environment": "staging"})
    assert res.outcome == "accepted"


async def test_quorum_needs_distinct_votes_for_the_same_action(db_url: str) -> None:
    route = {"timeout": 60, "quorum": 2, "veto": False,
             "slack": {"channel": "C_OPS", "approvers": {"users": ["U_A", "U_B", "U_C"]}}}
    engine, adapter, ref = await _form(db_url, route)
    a, b, c = (Identity("slack", u, u) for u in ("U_A", "U_B", "U_C"))
    first = await engine.respond(ref, a, "approve", {"environment": "staging"})
    assert (first.outcome, first.message) == (
        "recorded", "Recorded, 1 of 2 approvals: U_A (Approve).")
    assert first.card is not None and first.card.votes == 1 and first.card.status == "pending"
    dup = await engine.respond(ref, a, "approve", {"environment": "staging"})
    assert dup.outcome == "rejected" and "already recorded" in dup.message
    other = await engine.respond(ref, b, "reject", {"environment": "staging"})
    assert other.outcome == "recorded"
    final = await engine.respond(ref, c, "approve", {"environment": "production"})
    assert final.outcome == "accepted"
    assert final.card is not None and final.card.values == {"environment": "production"}
    assert len(adapter.updates) == 3


async def test_attach_files_then_submit(db_url: str) -> None:
    engine, _, ref = await _form(db_url)
    res = await engine.attach_files(ref, alice(), "logs", [FILE])
    assert res.outcome == "recorded" and "Attached 1 file(s)" in res.message
    bad = await engine.attach_files(ref, alice(), "comment", [FILE])
    assert bad.outcome == "rejected"
    eve = await engine.attach_files(ref, Identity("slack", "U_EVE"), "logs", [FILE])
    assert eve.outcome == "rejected"
    done = await engine.respond(ref, alice(), "approve", {"environment": "staging"})
    assert done.outcome == "accepted"
    assert done.card is not None and done.card.values["logs"] == [FILE]


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(("action", "values", "reason"), [
    ("approve", {"environment": "staging", "comment": "x" * 5_000_000},
     "\u201cComment\u201d is too large to be an answer"),
    ("approve", {"environment": "staging", "comment": "x" * 10_001},
     "\u201cComment\u201d is too long: at most 10000 characters"),
    ("approve", {"environment": "staging", "comment": _nested(100)},
     "\u201cComment\u201d is nested too deeply to be an answer"),
    ("approve", {"environment": "staging", "logs": [FILE] * 10_000},
     "\u201cLogs\u201d is too large to be an answer"),
    ("approve", {"environment": "staging", "logs": [{**FILE, "name": _nested(100)}]},
     "\u201cLogs\u201d is nested too deeply to be an answer"),
    ("approve", {"environment": "staging", "logs": [{**FILE, "name": ["a.log"]}]},
     "\u201cLogs\u201d contains a file with an invalid name"),
    ("approve", {"environment": "staging", "logs": [{**FILE, "url": "u" * 5000}]},
     "\u201cLogs\u201d contains a file with an invalid url"),
    ("x" * 100_000, {"environment": "staging"},
     "This request has no action \u201c" + "x" * 63 + "\u2026\u201d; "
     "choose \u201cApprove\u201d, \u201cReject\u201d"),
])
async def test_oversize_human_input_is_refused_and_nothing_stored(
    db_url: str, action: str, values: dict[str, Any], reason: str
) -> None:
    """A forged payload (5 MB text, 100-level nesting, 10,000 files) is refused with a
    reason; the request, its votes and its result are untouched (only an audit row)."""
    engine, _adapter, ref = await _form(db_url)
    before = _state(engine)
    res = await engine.respond(ref, alice(), action, values)
    assert (res.outcome, res.message) == ("rejected", reason)
    after = _state(engine)
    assert after[0] == before[0] and after[1] == before[1] and after[2] == before[2] + 1
    with engine.db.transaction() as s:
        row = s.scalars(select(AuditLog).order_by(AuditLog.id.desc())).first()
        assert row is not None and len(str(row.reason)) < 1000
        assert len(str(row.details)) < 1000


async def test_oversize_ref_is_unknown_without_a_lookup(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    engine, _adapter, _ref = await _form(db_url)
    caplog.set_level("INFO")
    huge = "r" * 1_000_000
    res = await engine.respond(huge, alice(), "approve", {})
    assert res.outcome == "not_found"
    assert await engine.card(huge) is None
    logged = [getattr(r, "ref", "") for r in caplog.records]
    assert logged and all(len(str(ref)) <= 64 for ref in logged)
