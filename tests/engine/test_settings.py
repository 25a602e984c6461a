"""Admin configuration: validation messages, env overrides and ``askhuman config check``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.settings import ConfigError, config_warnings, load_file, load_settings, parse_duration
from storage.db import MIGRATIONS_DIR, head_revision

MIGRATIONS = MIGRATIONS_DIR / "versions"

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "askhuman.yaml"
    path.write_text(text)
    return path


def _problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_file(_write(tmp_path, text))
    return info.value.problems


def test_example_and_builtin_default_are_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = load_file(ROOT / "askhuman.example.yaml")
    assert parsed.routes["ops"].timeout == 7200
    monkeypatch.delenv("ASKHUMAN_CONFIG", raising=False)
    monkeypatch.delenv("ASKHUMAN_DATABASE_URL", raising=False)
    settings = load_settings()
    assert settings.agents["deploy"].model == "scripted:deploy"
    assert settings.route_for("deploy").platforms() == ["console"]
    assert settings.database_url == "sqlite:///askhuman.db"


def test_env_overrides_database_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, "database_url: sqlite:///file.db\nagents: {}\nroutes: {}\n")
    assert load_settings(path).database_url == "sqlite:///file.db"
    monkeypatch.setenv("ASKHUMAN_DATABASE_URL", "postgresql+psycopg://x@h/db")
    assert load_settings(path).database_url == "postgresql+psycopg://x@h/db"


@pytest.mark.parametrize(("value", "seconds"), [("30m", 1800), ("2h", 7200), ("1d", 86400),
                                                (90, 90), ("45s", 45), ("1.5h", 5400)])
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


def test_bad_timeout_names_key_and_fix(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "routes:\n  ops:\n    timeout: soon\n    console: {}\n")
    assert problems == [
        'routes.ops.timeout: write a duration like "30m", "2h" or "1d", or a number of seconds'
    ]


def test_unknown_route_names_agent_and_route(tmp_path: Path) -> None:
    text = "agents:\n  deploy:\n    model: m\n    route: opz\nroutes:\n  ops:\n    console: {}\n"
    [problem] = _problems(tmp_path, text)
    assert "agent 'deploy' uses route 'opz'" in problem and "known routes: ops" in problem


def test_unknown_keys_are_errors(tmp_path: Path) -> None:
    text = "routes:\n  ops:\n    console: {}\n    slack_token: xoxb\n"
    assert _problems(tmp_path, text) == [
        "routes.ops.slack_token: unknown key; remove it or check its spelling"
    ]


def test_route_needs_recipients_and_approvers(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "routes:\n  a:\n    timeout: 1h\n  b:\n    slack:\n"
                                   "      channel: C1\n")
    assert problems[0] == "routes.a: a route needs at least one of: slack, feishu, console"
    assert "slack.approvers lists nobody" in problems[1]


def test_ask_human_limits_are_checked(tmp_path: Path) -> None:
    text = ("agents:\n  a:\n    model: m\n    ask_human: {max_fields: 99}\n"
            "routes:\n  default:\n    console: {}\n")
    assert _problems(tmp_path, text) == ["agents.a.ask_human: max_fields must be <= 16"]


def test_config_check_command(tmp_path: Path) -> None:
    ok = runner.invoke(app, ["config", "check", str(ROOT / "askhuman.example.yaml")])
    assert ok.exit_code == 0 and "is valid: 1 agent(s), 5 route(s)" in ok.output
    bad = _write(tmp_path, "routes:\n  ops:\n    timeout: soon\n    console: {}\n")
    result = runner.invoke(app, ["config", "check", str(bad)])
    assert result.exit_code == 1
    assert "routes.ops.timeout" in result.output and '"30m"' in result.output
    missing = runner.invoke(app, ["config", "check", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 1 and "cannot read the file" in missing.output


def test_db_upgrade_command(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    result = runner.invoke(app, ["db", "upgrade", "--database", url])
    assert result.exit_code == 0
    assert f"database is at revision {head_revision()}" in result.output
    assert head_revision() == sorted(p.stem for p in MIGRATIONS.glob("0*.py"))[-1]


NO_STARTERS = ("agents:\n  deploy: {model: 'scripted:deploy', route: ops}\n"
               "  report: {model: 'scripted:deploy', route: ops,\n"
               "           starters: {slack: {users: [U1]}}}\n"
               "routes:\n  ops:\n    slack: {channel: C1, approvers: {users: [U1]}}\n")


def test_config_check_names_missing_starters_and_the_fix(tmp_path: Path) -> None:
    path = _write(tmp_path, NO_STARTERS)
    load_file(path)  # still loads: the API and schedules may start runs later
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "is valid: 2 agent(s), 1 route(s), 1 warning(s):" in result.stdout
    assert "warning: agents.deploy.starters is missing, so nobody can start 'deploy'" \
        in result.stderr
    assert "starters: {slack: {users: [U0123456789]}}" in result.stderr
    assert "agents.report" not in result.output
    strict = runner.invoke(app, ["config", "check", "--strict", str(path)])
    assert strict.exit_code == 1 and "agents.deploy.starters" in strict.stderr


@pytest.mark.parametrize(("starters", "problem"), [
    ("{slack: {}}", "agents.deploy.starters.slack: lists nobody; add users, groups or "
                    "channel_members: true, or remove the section"),
    ("{feishu: {channel_members: true}}",
     "agents.deploy.starters.feishu.channel_members: route 'ops' has no feishu.chat_id whose "
     "members could start 'deploy'; set routes.ops.feishu.chat_id or list users instead"),
    ("{console: {groups: [S1]}}", "agents.deploy.starters.console: the console has no groups "
                                  "or channels; list console user names under users"),
    ("{teams: {users: [x]}}", "agents.deploy.starters.teams: unknown key; remove it or check "
                              "its spelling"),
])
def test_bad_starters_name_the_key_and_the_fix(tmp_path: Path, starters: str,
                                               problem: str) -> None:
    text = (f"agents:\n  deploy: {{model: m, route: ops, starters: {starters}}}\n"
            "routes:\n  ops:\n    slack: {channel: C1, approvers: {users: [U1]}}\n")
    assert _problems(tmp_path, text) == [problem]


def test_builtin_default_lets_the_demo_user_start_its_agent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ASKHUMAN_CONFIG", raising=False)
    starters = load_settings().agents["deploy"].starters
    assert starters is not None and starters.console is not None
    assert starters.console.users == ["demo-requester"]
    assert config_warnings(load_settings().agents) == []


def test_example_declares_starters_and_passes_strict_check() -> None:
    result = runner.invoke(app, ["config", "check", "--strict",
                                 str(ROOT / "askhuman.example.yaml")])
    assert result.exit_code == 0, result.output
    parsed = load_file(ROOT / "askhuman.example.yaml")
    assert parsed.agents["deploy"].starters is not None
    assert parsed.routes["ops"].slack is not None and not parsed.routes["ops"].slack.allow_external
