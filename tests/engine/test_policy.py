"""The frozen approval policy: veto, quorum, sign-off per group, people, required reasons.

Engine-level (fake adapter and directory, real SQLite and PostgreSQL); the same rules
end to end through the served app are in ``tests/ops/test_policy_served.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from bot.engine import Identity, policy
from bot.settings import ConfigError, FileSettings, _parse
from storage import AuditLog, HumanRequest
from tests.engine.helpers import (
    FORM_ARGS,
    ORIGIN,
    STARTER,
    AskingRuntime,
    FakeDirectory,
    make_engine,
    settings,
)

ARGS: dict[str, Any] = {
    **FORM_ARGS,
    "actions": [{"id": "approve", "label": "Approve", "style": "primary"},
                {"id": "hold", "label": "Hold"},
                {"id": "reject", "label": "Reject", "style": "destructive"}],
}
A, B, C = (Identity("slack", u, n) for u, n in (("U_A", "Alice"), ("U_B", "Bob"),
                                                ("U_C", "Carol")))
STAGING = {"environment": "staging"}


def route(**extra: Any) -> dict[str, Any]:
    return {"timeout": "30m", "quorum": 2,
            "slack": {"channel": "C_OPS", "approvers": {"users": ["U_A", "U_B", "U_C"]}},
            **extra}


async def ask(db_url: str, rules: dict[str, Any], **kw: Any) -> tuple[Any, Any, str, Any]:
    runtime = AskingRuntime(ARGS)
    engine, adapter, _ = make_engine(db_url, route=rules, fake=runtime, **kw)
    await engine.start_run("form", "go", STARTER, ORIGIN)
    return engine, adapter, adapter.delivered[0][0].ref, runtime


def request_row(engine: Any) -> HumanRequest:
    with engine.db.transaction() as session:
        row = session.scalars(select(HumanRequest)).one()
        session.expunge(row)
        return row


async def test_a_destructive_choice_vetoes_the_quorum_and_the_message_names_everyone(
    db_url: str,
) -> None:
    engine, adapter, ref, runtime = await ask(db_url, route())
    first = await engine.respond(ref, A, "approve", STAGING)
    assert (first.outcome, first.message) == (
        "recorded", "Recorded, 1 of 2 approvals: Alice (Approve).")
    assert first.card is not None and first.card.responses == (("Alice", "Approve"),)
    assert adapter.updates[-1][0].responses == (("Alice", "Approve"),)
    veto = await engine.respond(ref, B, "reject", STAGING)
    assert veto.outcome == "accepted"
    await engine.run_worker_once()
    got = runtime.resumes[0]["call_1"]
    assert got.action is not None and got.action.id == "reject"
    assert got.message == "Vetoed by Bob (Reject). Responses: Alice (Approve), Bob (Reject)."
    late = await engine.respond(ref, C, "approve", STAGING)
    assert late.outcome == "already_decided"


async def test_veto_false_and_non_destructive_choices_wait_for_the_quorum(db_url: str) -> None:
    engine, _, ref, runtime = await ask(db_url, route(veto=False))
    assert (await engine.respond(ref, A, "reject", STAGING)).outcome == "recorded"
    assert (await engine.respond(ref, B, "hold", STAGING)).outcome == "recorded"
    done = await engine.respond(ref, C, "reject", STAGING)
    assert done.outcome == "accepted"
    await engine.run_worker_once()
    assert runtime.resumes[0]["call_1"].message == (
        "Decided. Responses: Alice (Reject), Bob (Hold), Carol (Reject).")


async def test_sign_off_needs_one_approver_per_group_and_a_person_counts_once(
    db_url: str,
) -> None:
    # Alice is in both groups, Bob only in SEC, Carol only in OPS.
    rules = route(quorum=1, require=[{"group": "S_SEC", "name": "Security"},
                                     {"users": ["U_A", "U_C"], "name": "Ops"}])
    directory = FakeDirectory(groups={"S_SEC": {"U_A", "U_B"}})
    engine, _, ref, runtime = await ask(db_url, rules, directory=directory)
    first = await engine.respond(ref, A, "approve", STAGING)
    assert first.outcome == "recorded"  # Alice alone signs for one group, not both
    assert first.card is not None and first.card.quorum == 2
    assert "Still needs sign-off from" in first.message
    assert first.card.signoffs in ((("Security", True), ("Ops", False)),
                                   (("Security", False), ("Ops", True)))
    # Bob (SEC only): Alice can move to Ops, so both groups are signed off.
    done = await engine.respond(ref, B, "approve", STAGING)
    assert done.outcome == "accepted", done.message
    await engine.run_worker_once()
    assert runtime.resumes[0]["call_1"].action.id == "approve"  # type: ignore[union-attr]


async def test_two_people_from_the_same_group_do_not_sign_for_the_other(db_url: str) -> None:
    rules = route(quorum=1, require=[{"group": "S_SEC"}, {"users": ["U_C"]}])
    directory = FakeDirectory(groups={"S_SEC": {"U_A", "U_B"}})
    engine, _, ref, _ = await ask(db_url, rules, directory=directory)
    assert (await engine.respond(ref, A, "approve", STAGING)).outcome == "recorded"
    second = await engine.respond(ref, B, "approve", STAGING)
    assert second.outcome == "recorded"
    assert second.card is not None and second.card.signoffs == (("S_SEC", True),
                                                                ("group 2", False))


async def test_a_sign_off_member_who_is_no_approver_may_sign(db_url: str) -> None:
    rules = route(quorum=1, require=[{"group": "S_SEC"}, {"users": ["U_D"]}])
    engine, _, ref, _ = await ask(db_url, rules,
                                  directory=FakeDirectory(groups={"S_SEC": {"U_A"}}))
    stranger = await engine.respond(ref, Identity("slack", "U_X"), "approve", STAGING)
    assert stranger.outcome == "rejected"
    assert (await engine.respond(ref, A, "approve", STAGING)).outcome == "recorded"
    assert [c.ref for c in await engine.pending_for(Identity("slack", "U_D"))] == [ref]
    assert await engine.pending_for(Identity("slack", "U_X")) == []
    dana = await engine.respond(ref, Identity("slack", "U_D", "Dana"), "approve", STAGING)
    assert dana.outcome == "accepted", dana.message


async def test_a_missing_reason_is_refused_and_a_given_one_reaches_agent_and_audit(
    db_url: str,
) -> None:
    engine, adapter, ref, runtime = await ask(db_url, route(quorum=1,
                                                            require_reason=["reject"]))
    card = adapter.delivered[0][0]
    field = next(f for f in card.args.fields if f.name == "reason")
    assert field.type == "paragraph" and field.label == "Reason" and not field.required
    refused = await engine.respond(ref, A, "reject", {**STAGING, "reason": "   "})
    assert refused.outcome == "rejected"
    assert refused.message == ("\u201cReject\u201d needs a reason: write it in the "
                               "\u201cReason\u201d field, then choose \u201cReject\u201d "
                               "again. Nothing was recorded yet.")
    assert request_row(engine).status == "pending" and adapter.updates == []
    # Approve needs none; a reject with a reason decides and the reason travels.
    done = await engine.respond(ref, A, "reject", {**STAGING, "reason": "too risky"})
    assert done.outcome == "accepted"
    await engine.run_worker_once()
    assert runtime.resumes[0]["call_1"].values["reason"] == "too risky"
    with engine.db.transaction() as session:
        rows = {a.event: a for a in session.scalars(select(AuditLog))}
    assert rows["respond_reason_missing"].outcome == "refused"
    assert rows["decided"].reason == "too risky"


async def test_the_frozen_policy_outlives_a_config_change_and_old_rows_use_the_live_route(
    db_url: str,
) -> None:
    engine, _, ref, _ = await ask(db_url, route())
    frozen = request_row(engine).policy
    assert frozen is not None and frozen["route"]["quorum"] == 2
    # The admin lowers the quorum and drops Bob: the open request keeps its rules.
    engine.apply_settings(settings(route(quorum=1, slack={
        "channel": "C_OPS", "approvers": {"users": ["U_A"]}}), engine.settings.database_url))
    assert (await engine.respond(ref, A, "approve", STAGING)).outcome == "recorded"
    assert (await engine.respond(ref, B, "approve", STAGING)).outcome == "accepted"

    # A request stored before 0010_policy (no frozen copy) follows the live route.
    row = request_row(engine)
    with engine.db.transaction() as session:
        session.get(HumanRequest, row.id).policy = None  # type: ignore[union-attr]
    live = policy.of(request_row(engine), engine.settings)
    assert live is not None and not live.frozen and live.quorum == 1
    assert live.shown()["source"].startswith("current route configuration")


@pytest.mark.parametrize(("rules", "problem"), [
    (route(quorum=4), "routes.ops.quorum: needs 4 distinct approvers but the route lists "
                      "only 3; lower quorum or add approvers"),
    (route(require=[{"team": "S_SEC"}]), "routes.ops.require.0.team: unknown key"),
    (route(require=[{"group": "S_SEC", "users": ["U_A"]}]),
     "routes.ops.require.0: a sign-off group is either {group: S0123456789}"),
    (route(require=[{"group": "sec-team"}]),
     "routes.ops.require.0.group: 'sec-team' is not a Slack user group id"),
    (route(require_reason=["reject*"]),
     "routes.ops.require_reason: 'reject*' is not an action id; list the ids"),
])
def test_config_check_names_the_key_and_the_fix(rules: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        _parse({"agents": {}, "routes": {"ops": rules}}, "askhuman.yaml")
    assert any(p.startswith(problem) for p in info.value.problems), info.value.problems


def test_people_map_one_identity_to_one_person() -> None:
    with pytest.raises(ConfigError) as info:
        _parse({"routes": {"ops": route()}, "people": {
            "alice": {"slack": "U_A"}, "al": {"slack": "U_A"}}}, "askhuman.yaml")
    assert info.value.problems == [
        "people.al.slack: U_A is already people.alice.slack; one identity is one person"]
    parsed = FileSettings.model_validate({"routes": {"ops": route()}, "people": {
        "alice": {"slack": "U_A", "feishu": "alice@example.com"}}})
    assert parsed.people["alice"].on("feishu") == "alice@example.com"


def test_config_check_cli_reports_every_policy_mistake(tmp_path: Any) -> None:
    import yaml
    from typer.testing import CliRunner

    from bot.cli import app

    path = tmp_path / "askhuman.yaml"
    path.write_text(yaml.safe_dump({"routes": {
        "ops": route(quorum=5, require_reason=["re ject"]),
        "sec": route(require=[{"group": "S_SEC", "users": ["U_A"]}])},
        "people": {"bob": {"slack": "U_B"}, "robert": {"slack": "U_B"}}}))
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code != 0
    for key in ("routes.ops.require_reason", "routes.sec.require.0"):
        assert key in result.output, result.output
    path.write_text(yaml.safe_dump({"routes": {"ops": route(quorum=5)}}))
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert "routes.ops.quorum: needs 5 distinct approvers" in result.output, result.output
    path.write_text(yaml.safe_dump({"routes": {"ops": route()}, "people": {
        "bob": {"slack": "U_B"}, "robert": {"slack": "U_B"}}}))
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert "people.robert.slack: U_B is already people.bob.slack" in result.output


async def test_one_mapped_person_clicking_on_both_platforms_at_once_votes_once(
    db_url: str,
) -> None:
    import asyncio

    from bot.settings import PersonSettings

    rules = route(feishu={"chat_id": "oc_ops", "approvers": {"users": ["ou_a"]}})
    engine, _, ref, _ = await ask(db_url, rules)
    engine.apply_settings(engine.settings.model_copy(update={"people": {
        "alice": PersonSettings(slack="U_A", feishu="ou_a")}}))
    feishu_alice = Identity("feishu", "ou_a", "Alice (Feishu)")
    both = await asyncio.gather(engine.respond(ref, A, "approve", STAGING),
                                engine.respond(ref, feishu_alice, "approve", STAGING))
    assert sorted(r.outcome for r in both) == ["recorded", "rejected"]
    refused = next(r for r in both if r.outcome == "rejected")
    assert refused.message.startswith("You already answered (approve) on ")
    card = await engine.card(ref)
    assert card is not None and card.votes == 1 and card.status == "pending"
    assert (await engine.respond(ref, B, "approve", STAGING)).outcome == "accepted"


def test_the_reason_goes_in_the_forms_own_reason_paragraph_or_a_new_field() -> None:
    rules = settings(route(require_reason=["reject"])).routes["ops"]
    select_reason = {"type": "select", "name": "reason", "label": "Why",
                     "options": [{"value": "a", "label": "A"}]}
    own = {"type": "paragraph", "name": "reason", "label": "Why"}
    for fields, expected, added in (([], "reason", True), ([own], "reason", False),
                                    ([select_reason], "askhuman_reason", True)):
        row = HumanRequest(args={**ARGS, "fields": fields}, route="ops")
        frozen = policy.freeze(row, settings(route(require_reason=["reject"])), "ops", rules)
        assert frozen.reason_field == expected
        assert len(row.args["fields"]) == len(fields) + added
        assert row.policy is not None and row.policy["reason_field"] == expected
    assert policy.reason_missing(frozen, "reject", {"askhuman_reason": " "})
    assert not policy.reason_missing(frozen, "reject", {"askhuman_reason": "why"})
    assert not policy.reason_missing(frozen, "approve", {})


def test_a_reason_required_for_approve_is_required_for_the_whole_approve_family() -> None:
    """Approve and allow similar… and Edit and approve are approvals too: a route that
    wants a reason for Approve gets one whichever approve button is used."""
    rules = settings(route(require_reason=["approve"])).routes["ops"]
    row = HumanRequest(args={**ARGS, "fields": []}, route="ops")
    frozen = policy.freeze(row, settings(route(require_reason=["approve"])), "ops", rules)
    for action in ("approve", "approve_grant", "approve_edit"):
        assert policy.reason_missing(frozen, action, {"reason": ""}), action
        assert not policy.reason_missing(frozen, action, {"reason": "checked the diff"})
    assert not policy.reason_missing(frozen, "reject", {})


def test_sign_offs_count_a_tool_approvals_approve_family_as_one_choice() -> None:
    """Security approves, the other group's member approves and allows similar calls:
    both groups have signed off the one approval (the card must say so)."""
    rules = settings(route(quorum=1, require=[{"group": "S_SEC", "name": "Security"},
                                              {"users": ["U_C"], "name": "Owners"}]))
    frozen = policy.Policy.from_route("ops", rules.routes["ops"], rules)
    votes = [policy.Ballot("slack:U_A", "A", "approve", "Approve", (0,)),
             policy.Ballot("slack:U_C", "C", "approve_grant", "Approve and allow similar…",
                           (1,))]
    assert policy.signed_off(frozen, votes) == (("Security", True), ("Owners", True))
    rejected = [votes[0], policy.Ballot("slack:U_C", "C", "reject", "Reject", (1,))]
    assert policy.signed_off(frozen, rejected) == (("Security", True), ("Owners", False))
