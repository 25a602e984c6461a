"""``askhuman demo`` goes through engine + storage + console, offline."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASKHUMAN_CONFIG", raising=False)
    monkeypatch.delenv("ASKHUMAN_DATABASE_URL", raising=False)


@pytest.mark.parametrize(("answer", "expected"), [
    ("approve", "Deployed v2.3.1 to staging. Health checks are green."),
    ("reject", "Deployment of v2.3.1 cancelled: the reviewer rejected it."),
    ("timeout", "No approval for v2.3.1 arrived in time"),
])
def test_non_interactive_answers(answer: str, expected: str) -> None:
    result = runner.invoke(app, ["demo", "--answer", answer])
    assert result.exit_code == 0, result.output
    assert expected in result.output
    assert "Deploy v2.3.1?" in result.output


def test_interactive_answer() -> None:
    result = runner.invoke(app, ["demo"], input="production\nlooks good\napprove\n")
    assert result.exit_code == 0, result.output
    assert "Deployed v2.3.1 to production. Health checks are green. Reviewer note: looks good" \
        in result.output


def test_interactive_reprompts_on_bad_value() -> None:
    result = runner.invoke(app, ["demo"], input="moon\n\napprove\nstaging\n\napprove\n")
    assert result.exit_code == 0, result.output
    assert "must be one of: staging, production" in result.output
    assert "Deployed v2.3.1 to staging" in result.output


def test_other_scripted_agent_and_persistent_database(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/demo.db"
    result = runner.invoke(app, ["demo", "--agent", "release", "--answer", "approve",
                                 "--database", url])
    assert result.exit_code == 0, result.output
    assert "Released v2.3.1" in result.output


def test_demo_with_a_config_whose_agent_nobody_may_start(tmp_path: object) -> None:
    config = f"{tmp_path}/askhuman.yaml"
    with open(config, "w") as out:
        out.write("agents:\n  deploy: {model: 'scripted:deploy', route: default}\n"
                  "routes:\n  default: {console: {enabled: true}}\n")
    result = runner.invoke(app, ["demo", "--answer", "approve", "--config", config])
    assert result.exit_code == 1
    assert ("error: You are not allowed to start 'deploy'. An admin can add you under "
            "agents.deploy.starters.console.") in result.output
    assert "Deploy v2.3.1?" not in result.output  # no card was shown
@pytest.mark.parametrize(("answer", "said", "lines"), [
    ("approve", "Done: restarted web on demo-cluster", 1),
    ("reject", "I did not restart web: The reviewer rejected this call; the action was not run.",
     0),
    ("timeout", "I did not restart web: No approval within 30m; the action was not run.", 0),
])
def test_agent_that_acts_runs_its_tool_only_when_approved(
    answer: str, said: str, lines: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "journal.txt"
    monkeypatch.setenv("ASKHUMAN_DEMO_JOURNAL", str(journal))
    result = runner.invoke(app, ["demo", "--agent", "ops", "--answer", answer,
                                 "--prompt", "restart web please"])
    assert result.exit_code == 0, result.output
    assert "Approve tool call: restart_service" in result.output
    assert "cluster: demo-cluster (fixed by admin)" in result.output
    assert said in result.output
    written = journal.read_text().splitlines() if journal.exists() else []
    assert len(written) == lines
    if lines:
        assert written[0].endswith("restarted web on demo-cluster (restart web please)")
        assert "Ran restart_service(service=web, reason=restart web please): ok" in result.output
    else:
        assert "(the tool never ran)" in result.output


def test_agent_that_acts_interactively(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASKHUMAN_DEMO_JOURNAL", str(tmp_path / "journal.txt"))
    result = runner.invoke(app, ["demo", "--agent", "ops"], input="not today\nreject\n")
    assert result.exit_code == 0, result.output
    assert ("I did not restart api: The reviewer rejected this call: not today The action "
            "was not run.") in result.output
    assert not (tmp_path / "journal.txt").exists()
