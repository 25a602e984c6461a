"""Standing grants with an embedded pydantic-ai agent: made from an approval, used by
the next matching call (the tool runs without a card), limited by scope, time, uses,
revocation, quorum, veto and the route's config; every event audited and chained."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import func, select

from bot.engine import Identity
from storage import HumanRequest, ResumeJob
from tests.engine.grant_setup import ALICE, BOB, GrantWorld, grant_settings, grant_values
from tests.engine.helpers import ORIGIN, STARTER
from tests.tools import sample_tools

ORIGIN_STRANGER = Identity("slack", "U_MALLORY", "Mallory")


async def _granted(world: GrantWorld, uses: int = 5, seconds: int = 3600,
                   **args: Any) -> str:
    ref = await world.call(**(args or {"service": "web", "replicas": 5}))
    answer = await world.engine.respond(ref, ALICE, "approve_grant",
                                        grant_values(seconds, uses))
    assert answer.outcome == "accepted"
    assert "Standing grant G-" in answer.message
    await world.engine.run_worker_once()
    return ref


async def test_a_matching_call_is_approved_by_the_grant_and_the_tool_runs(db_url: str) -> None:
    world = GrantWorld(db_url)
    sample_tools.CALLS.clear()
    first = await _granted(world, uses=5)
    [grant] = world.grants()
    assert (grant.agent, grant.tool, grant.max_uses, grant.uses) == ("ops", "scale", 5, 0)
    assert grant.args == {"service": "web", "replicas": 5, "cluster": "prod-eu"}
    assert world.events("grant_created")[0]["max_uses"] == 5
    assert len(sample_tools.CALLS) == 1

    second = await world.call(service="web", replicas=5)
    row = world.request(second)
    assert row.status == "submitted" and row.action_id == "approve"
    assert (row.decided_by_platform, row.decided_by_user) == ("grant", f"G-{grant.id}")
    assert row.decided_by_name == f"standing grant G-{grant.id} from Alice"
    assert not world.carded(second) and world.carded(first)
    assert await world.engine.run_worker_once() == 1
    assert len(sample_tools.CALLS) == 2  # the tool ran, approved by the grant
    lines = [text for origin, text in world.adapter.results if origin == ORIGIN]
    until = f"{world.clock.now:%Y-%m-%d} 13:00 UTC"
    assert f"Approved by standing grant G-{grant.id} from Alice (4 of 5 uses left, " \
           f"until {until})." in lines
    assert world.events("grant_used")[0]["grant"] == f"G-{grant.id}"
    assert world.chain_ok()


async def test_other_arguments_get_a_card_without_a_scope(db_url: str) -> None:
    world = GrantWorld(db_url)
    await _granted(world)
    other = await world.call(service="web", replicas=6)
    assert world.request(other).status == "pending" and world.carded(other)
    assert world.grants()[0].uses == 0


async def test_grant_scope_matches_and_does_not_match(db_url: str) -> None:
    world = GrantWorld(db_url, scope="args.service == call.service && args.replicas <= 10")
    await _granted(world)
    wider = await world.call(service="web", replicas=9)
    assert world.request(wider).status == "submitted" and not world.carded(wider)
    other_service = await world.call(service="db", replicas=5)
    too_many = await world.call(service="web", replicas=11)
    for ref in (other_service, too_many):
        assert world.request(ref).status == "pending" and world.carded(ref)


async def test_uses_run_out_and_the_last_use_expires_the_grant(db_url: str) -> None:
    world = GrantWorld(db_url, grants={"max_duration": "8h", "max_uses": 2})
    await _granted(world, uses=2)
    refs = [await world.call(service="web", replicas=5) for _ in range(3)]
    assert [world.request(r).status for r in refs] == ["submitted", "submitted", "pending"]
    assert world.events("grant_expired") == [{"grant": f"G-{world.grants()[0].id}",
                                              "why": "uses", "uses": 2}]


async def test_a_grant_expires_by_time_even_before_the_sweep(db_url: str) -> None:
    world = GrantWorld(db_url)
    await _granted(world, seconds=900)
    world.clock.advance(901)
    late = await world.call(service="web", replicas=5)
    assert world.request(late).status == "pending" and world.carded(late)
    assert world.events("grant_expired") == []
    assert await world.engine.expire_grants() == 1
    assert await world.engine.expire_grants() == 0
    assert world.events("grant_expired")[0]["why"] == "time"
    assert world.chain_ok()


async def test_revocation_takes_effect_at_once(db_url: str) -> None:
    world = GrantWorld(db_url)
    await _granted(world)
    [grant] = world.grants()
    assert [g.label for g in await world.engine.active_grants(BOB)] == [f"G-{grant.id}"]
    stranger = await world.engine.revoke_grant(grant.id, ORIGIN_STRANGER)
    assert stranger.outcome == "rejected" and "may not revoke" in stranger.message
    done = await world.engine.revoke_grant(grant.id, BOB)
    assert done.outcome == "accepted"
    again = await world.engine.revoke_grant(grant.id, BOB)
    assert again.outcome == "already_decided"
    assert (await world.engine.revoke_grant(grant.id + 99, BOB)).outcome == "not_found"
    after = await world.call(service="web", replicas=5)
    assert world.request(after).status == "pending" and world.carded(after)
    assert await world.engine.active_grants(BOB) == []
    assert world.events("grant_revoked") == [{"grant": f"G-{grant.id}"}]


async def test_a_quorum_grant_needs_every_counted_vote_to_grant(db_url: str) -> None:
    world = GrantWorld(db_url, quorum=2)
    ref = await world.call(service="web", replicas=5)
    first = await world.engine.respond(ref, ALICE, "approve_grant", grant_values(3600, 5))
    assert first.outcome == "recorded"
    mixed = await world.engine.respond(ref, BOB, "approve", {})
    assert mixed.outcome == "accepted" and "without a standing grant" in mixed.message
    assert world.request(ref).status == "submitted" and world.grants() == []

    both = await world.call(service="web", replicas=5)
    assert world.request(both).status == "pending"  # no grant was made: a card again
    await world.engine.respond(both, ALICE, "approve_grant", grant_values(3600, 5))
    agreed = await world.engine.respond(both, BOB, "approve_grant", grant_values(900, 10))
    assert agreed.outcome == "accepted"
    [grant] = world.grants()
    assert grant.max_uses == 5  # the smallest of both
    assert (grant.expires_at - grant.created_at).total_seconds() == 900
    assert grant.granted_by_name == "Alice, Bob"


async def test_a_veto_wins_over_a_grant_vote(db_url: str) -> None:
    world = GrantWorld(db_url, quorum=2)
    ref = await world.call(service="web", replicas=5)
    await world.engine.respond(ref, ALICE, "approve_grant", grant_values())
    vetoed = await world.engine.respond(ref, BOB, "reject", {})
    assert vetoed.outcome == "accepted"
    row = world.request(ref)
    assert (row.status, row.action_id) == ("submitted", "reject")
    assert world.grants() == []


async def test_removing_grants_from_the_route_stops_new_grants(db_url: str) -> None:
    world = GrantWorld(db_url)
    ref = await world.call(service="web", replicas=5)
    world.engine.apply_settings(grant_settings(db_url, grants=None))
    answer = await world.engine.respond(ref, ALICE, "approve_grant", grant_values())
    assert answer.outcome == "accepted"
    assert "no longer allows grants" in answer.message
    assert world.grants() == []
    fresh = await world.call(service="web", replicas=5)
    card = next(c for c, _ in world.adapter.delivered if c.ref == fresh)
    assert [a.id for a in card.args.actions] == ["approve", "reject"]


async def test_values_outside_the_offer_are_refused(db_url: str) -> None:
    world = GrantWorld(db_url, grants={"max_duration": "1h", "max_uses": 7})
    ref = await world.call(service="web", replicas=5)
    card = next(c for c, _ in world.adapter.delivered if c.ref == ref)
    fields = {f.name: [o.value for o in getattr(f, "options", [])] for f in card.args.fields}
    assert fields["grant_duration"] == ["900", "3600"]
    assert fields["grant_uses"] == ["1", "5", "7"]
    refused = await world.engine.respond(ref, ALICE, "approve_grant",
                                         grant_values(seconds=86400, uses=5))
    assert refused.outcome == "rejected"
    refused = await world.engine.respond(ref, ALICE, "approve_grant", grant_values(3600, 50))
    assert refused.outcome == "rejected"
    assert world.grants() == [] and world.request(ref).status == "pending"


async def test_concurrent_matching_calls_use_exactly_the_uses_left(db_url: str) -> None:
    world = GrantWorld(db_url, grants={"max_duration": "8h", "max_uses": 3})
    await _granted(world, uses=3)
    refs = await asyncio.gather(*(world.call(service="web", replicas=5) for _ in range(10)))
    statuses = sorted(world.request(r).status for r in refs)
    assert statuses == ["pending"] * 7 + ["submitted"] * 3
    assert world.grants()[0].uses == 3
    assert len(world.events("grant_used")) == 3
    assert world.chain_ok()


async def test_a_step_with_a_granted_and_an_asked_call_resumes_once_after_both(
        db_url: str) -> None:
    world = GrantWorld(db_url)
    await _granted(world)
    sample_tools.CALLS.clear()
    world.script.steps = ([("scale", {"service": "web", "replicas": 5}),
                           ("scale", {"service": "db", "replicas": 2})],)
    run_id = await world.engine.start_run("ops", "both", STARTER, ORIGIN)
    await world.engine.drain()
    with world.db.transaction() as session:
        rows = list(session.scalars(select(HumanRequest).where(HumanRequest.run_id == run_id)
                                    .order_by(HumanRequest.id)))
        assert [r.status for r in rows] == ["submitted", "pending"]
        assert session.scalar(select(func.count()).select_from(ResumeJob).where(
            ResumeJob.run_id == run_id)) == 0  # the step waits for its other call
        asked = rows[1].ref
    assert await world.engine.run_worker_once() == 0 and sample_tools.CALLS == []
    await world.engine.respond(asked, ALICE, "approve", {})
    assert await world.engine.run_worker_once() == 1
    assert sorted(c[1]["service"] for c in sample_tools.CALLS) == ["db", "web"]


async def test_a_step_whose_calls_are_all_granted_resumes_at_once(db_url: str) -> None:
    world = GrantWorld(db_url, scope="args.service == call.service")
    await _granted(world)
    sample_tools.CALLS.clear()
    world.script.steps = ([("scale", {"service": "web", "replicas": 1}),
                           ("scale", {"service": "web", "replicas": 2})],)
    await world.engine.start_run("ops", "both granted", STARTER, ORIGIN)
    await world.engine.drain()
    assert await world.engine.run_worker_once() == 1
    assert sorted(c[1]["replicas"] for c in sample_tools.CALLS) == [1, 2]
    assert world.grants()[0].uses == 2
