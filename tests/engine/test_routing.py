"""Routing rules as code: the first matching CEL rule picks the route and overrides;
the dry run (``askhuman route test``) agrees with the engine; config errors name keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select
from typer.testing import CliRunner

from bot.cli import app
from bot.engine import Engine, policy
from bot.engine.routing import route_request
from bot.settings import ConfigError, load_file, load_settings
from storage import AuditLog, Database, HumanRequest
from tests.engine.helpers import (
    ORIGIN,
    STARTER,
    STARTERS,
    FakeClock,
    FakeDirectory,
    scripted_runtimes,
)
from tests.engine.test_reminders import RemindingAdapter

RULES = [
    {"when": "agent == 'deploy' && args.fields.exists(f, f.name == 'environment')",
     "route": "prod-deploys", "quorum": 2, "timeout": "2h"},
    {"when": "tool == 'refund' && args.amount > 1000", "route": "finance"},
]


def config(tmp_path: Path, db_url: str, rules: list[dict[str, object]] = RULES) -> Path:
    data = {
        "database_url": db_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                              "starters": STARTERS}},
        "routes": {
            "ops": {"timeout": "1h", "slack": {"channel": "C_OPS",
                                               "approvers": {"users": ["U_ALICE"]}}},
            "prod-deploys": {"timeout": "1h", "reminder": "25%",
                             "slack": {"channel": "C_PROD",
                                       "approvers": {"users": ["U_ALICE", "U_BOB"]}}},
            "finance": {"slack": {"channel": "C_FIN", "approvers": {"users": ["U_FIN"]}},
                        "escalation": {"after": "30m", "route": "ops"}},
        },
        "rules": rules,
    }
    path = tmp_path / "askhuman.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


async def test_a_rule_matches_and_the_dry_run_agrees(tmp_path: Path, db_url: str) -> None:
    path = config(tmp_path, db_url)
    settings = load_settings(path)
    db = Database(db_url)
    db.upgrade()
    engine = Engine(db, settings, scripted_runtimes(), FakeClock())
    adapter = RemindingAdapter()
    engine.register_adapter(adapter, FakeDirectory())
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    [(_card, target)] = adapter.delivered
    assert target.id == "C_PROD"  # not the agent's route (ops)
    with db.transaction() as s:
        request = s.scalars(select(HumanRequest)).one()
        route, quorum, args = request.route, request.quorum, dict(request.args)
        waited = (request.deadline - request.created_at).total_seconds()
        reminder = (request.next_reminder_at - request.created_at).total_seconds()
        created = s.scalars(select(AuditLog).where(AuditLog.event == "request_created")).one()
    assert (route, quorum, waited) == ("prod-deploys", 2, 7200)
    assert reminder == 1800  # 25% of the rule's 2h, not of the route's 1h
    assert created.details["route"] == "prod-deploys"

    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps(args))
    runner = CliRunner()
    out = runner.invoke(app, ["route", "test", str(args_file), "--agent", "deploy",
                              "--config", str(path), "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert result["policy"]["route"] == route and result["policy"]["quorum"] == quorum
    assert result["policy"]["rule"] == 0 and result["policy"]["timeout"] == "2h"
    assert result["policy"]["reminder"] == "25%"
    assert [v["matched"] for v in result["rules"]] == [True, False]
    words = runner.invoke(app, ["route", "test", str(args_file), "--agent", "deploy",
                                "--config", str(path)])
    assert "rules[0] match" in words.output and "=> route prod-deploys" in words.output
    wrong = runner.invoke(app, ["route", "test", str(args_file), "--agent", "deploy",
                                "--config", str(path), "--expect-route", "ops"])
    assert wrong.exit_code == 1 and "expected route 'ops', got 'prod-deploys'" in wrong.output


async def test_a_rules_policy_overrides_are_frozen_with_the_request(
        tmp_path: Path, db_url: str) -> None:
    """veto / require_reason / allow_self_approval set by a rule are the request's rules,
    and the dry run reports the same."""
    path = config(tmp_path, db_url, [{"when": "agent == 'deploy'", "route": "prod-deploys",
                                      "quorum": 2, "veto": False,
                                      "require_reason": ["reject"]}])
    settings = load_settings(path)
    db = Database(db_url)
    db.upgrade()
    engine = Engine(db, settings, scripted_runtimes(), FakeClock())
    engine.register_adapter(RemindingAdapter(), FakeDirectory())
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    with db.transaction() as s:
        request = s.scalars(select(HumanRequest)).one()
        rules = policy.of(request, settings)
        args = dict(request.args)
    assert rules is not None and rules.frozen
    assert (rules.route_name, rules.quorum, rules.veto, rules.require_reason) == (
        "prod-deploys", 2, False, ["reject"])
    assert settings.routes["prod-deploys"].veto is True  # the route itself is unchanged
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps(args))
    out = CliRunner().invoke(app, ["route", "test", str(args_file), "--agent", "deploy",
                                   "--config", str(path), "--json"])
    shown = json.loads(out.output)["policy"]
    assert (shown["veto"], shown["require_reason"], shown["quorum"]) == (False, ["reject"], 2)


def test_tool_rules_first_match_and_errors_fall_through(tmp_path: Path) -> None:
    settings = load_settings(config(tmp_path, "sqlite://"))
    big = route_request(settings, agent="deploy", tool="refund", args={"amount": 5000},
                        fallback="ops", explain=True)
    assert (big.name, big.rule) == ("finance", 1)
    small = route_request(settings, agent="deploy", tool="refund", args={"amount": 10},
                          fallback="ops")
    assert (small.name, small.rule, small.route.quorum) == ("ops", None, 1)
    missing = route_request(settings, agent="other", tool="refund", args={"note": "x"},
                            fallback="ops", explain=True)
    assert missing.name == "ops"
    assert missing.verdicts[1].error is not None and not missing.verdicts[1].matched
    assert "eval" not in json.dumps([v.when for v in missing.verdicts])


def test_dry_run_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    args = tmp_path / "a.json"
    args.write_text("{}")
    broken = config(tmp_path, "sqlite://", [{"when": "agent ==", "route": "ops"}])
    out = runner.invoke(app, ["route", "test", str(args), "--agent", "deploy",
                              "--config", str(broken)])
    assert out.exit_code == 2 and "rules.0.when: does not compile as CEL" in out.output
    good = config(tmp_path, "sqlite://")
    unknown = runner.invoke(app, ["route", "test", str(args), "--agent", "nope",
                                  "--config", str(good)])
    assert unknown.exit_code == 2 and "agent 'nope' is not defined" in unknown.output
    args.write_text("{not json")
    bad = runner.invoke(app, ["route", "test", str(args), "--agent", "deploy",
                              "--config", str(good)])
    assert bad.exit_code == 2 and "cannot read" in bad.output


@pytest.mark.parametrize(("rules", "expected"), [
    ([{"when": "args.x >", "route": "ops"}], "rules.0.when: does not compile as CEL"),
    ([{"when": "true", "route": "ops"}, {"when": "true", "route": "nowhere"}],
     "rules.1.route: route 'nowhere' is not defined under routes; name one of: finance, "
     "ops, prod-deploys"),
    ([{"when": "true", "route": "finance", "timeout": "10m"}],
     "rules.0.timeout: is too short for routes.finance.escalation.after: must be shorter "
     "than timeout (30m is not shorter than 10m)"),
    ([{"when": "true", "route": "ops", "quorum": 0}],
     "rules.0.quorum: Input should be greater than or equal to 1"),
    ([{"when": "true", "route": "ops", "channel": "C_X"}],
     "rules.0.channel: unknown key; remove it or check its spelling"),
    ([{"when": "true", "route": "ops", "require_reason": ["re ject"]}],
     "rules.0.require_reason: 're ject' is not an action id"),
])
def test_config_check_names_rule_keys(tmp_path: Path, rules: list[dict[str, object]],
                                      expected: str) -> None:
    path = config(tmp_path, "sqlite://", rules)
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert len(info.value.problems) == 1 and info.value.problems[0].startswith(expected), \
        info.value.problems
    out = CliRunner().invoke(app, ["config", "check", str(path)])
    assert out.exit_code == 1 and expected in out.output


def test_dry_run_falls_back_to_the_tools_route(tmp_path: Path) -> None:
    path = config(tmp_path, "sqlite://", [{"when": "tool == 'refund' && args.amount > 1000",
                                          "route": "prod-deploys"}])
    data = yaml.safe_load(path.read_text())
    data["agents"]["deploy"]["tools"] = [{"python": "bot.tools.demo:restart_service",
                                          "route": "finance"}]
    path.write_text(yaml.safe_dump(data))
    args = tmp_path / "a.json"
    args.write_text('{"amount": 5}')
    runner = CliRunner()
    small = runner.invoke(app, ["route", "test", str(args), "--agent", "deploy", "--tool",
                                "restart_service", "--config", str(path), "--json"])
    assert small.exit_code == 0, small.output
    assert json.loads(small.output)["policy"]["route"] == "finance"
    args.write_text('{"amount": 5000}')
    big = runner.invoke(app, ["route", "test", str(args), "--agent", "deploy", "--tool",
                              "refund", "--config", str(path), "--json"])
    assert json.loads(big.output)["policy"]["route"] == "prod-deploys"
