"""``pending_page``: every open request a person may answer, however many other routes
have open, filtered in the query, authorized per request, and paginated."""

from __future__ import annotations

from bot.engine import Engine, Identity
from bot.settings import FileSettings, Settings
from storage import Database
from tests.engine.helpers import FakeAdapter, FakeClock, FakeDirectory, scripted_runtimes
from tests.engine.pending_rows import add_open_requests

ALICE = Identity("slack", "U_ALICE", "Alice")
CAROL = Identity("slack", "U_CAROL", "Carol")
MALLORY = Identity("slack", "U_MALLORY", "Mallory")


def two_routes(db_url: str) -> Engine:
    parsed = FileSettings.model_validate({
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops"}},
        "routes": {
            "ops": {"timeout": "1h", "slack": {"channel": "C_OPS",
                                                "approvers": {"users": ["U_ALICE"]}}},
            "other": {"timeout": "1h", "escalation": {"after": "10m", "route": "ops"},
                      "slack": {"channel": "C_OTHER", "approvers": {"users": ["U_CAROL"]}}},
            "terminal": {"timeout": "1h", "console": {"enabled": True}},
        },
    })
    settings = Settings(database_url=db_url, agents=parsed.agents, routes=parsed.routes)
    database = Database(db_url)
    database.upgrade()
    engine = Engine(database, settings, scripted_runtimes(), FakeClock())
    engine.register_adapter(FakeAdapter(), FakeDirectory())
    return engine


async def test_older_requests_elsewhere_never_hide_yours(db_url: str) -> None:
    engine = two_routes(db_url)
    add_open_requests(engine.db, "other", 230)  # older, on a route Alice cannot answer
    add_open_requests(engine.db, "terminal", 5)
    mine = add_open_requests(engine.db, "ops", 12)
    add_open_requests(engine.db, "ops", 1, starter="U_ALICE")  # her own run: not hers to approve
    escalated = add_open_requests(engine.db, "other", 1, escalated_to="ops")

    first = await engine.pending_page(ALICE)
    assert (first.total, first.page, first.pages, first.first) == (13, 1, 2, 1)
    assert [c.ref for c in first.cards] == mine[:10]
    second = await engine.pending_page(ALICE, page=2)
    assert [c.ref for c in second.cards] == mine[10:] + escalated
    assert (await engine.pending_page(ALICE, page=99)).page == 2  # clamped
    assert [c.ref for c in await engine.pending_for(ALICE)] == mine + escalated

    carol = await engine.pending_page(CAROL, page=3, per_page=50)
    assert (carol.total, carol.pages, len(carol.cards), carol.first) == (231, 5, 50, 101)
    nobody = await engine.pending_page(MALLORY)
    assert (nobody.total, nobody.cards, nobody.pages) == (0, [], 1)


async def test_decided_requests_leave_the_list(db_url: str) -> None:
    engine = two_routes(db_url)
    refs = add_open_requests(engine.db, "ops", 3)
    assert (await engine.respond(refs[1], ALICE, "approve", {})).outcome == "accepted"
    page = await engine.pending_page(ALICE)
    assert [c.ref for c in page.cards] == [refs[0], refs[2]] and page.total == 2
