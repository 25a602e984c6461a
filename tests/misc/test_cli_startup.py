"""``askhuman --help`` lists every command without importing the heavy stack."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import COMMANDS, load_command

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "pydantic_ai", "slack_sdk", "lark_oapi", "celpy", "mcp", "bot.engine")


def test_top_level_help_imports_no_engine_or_sdk() -> None:
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom bot.cli import app\n"
        "out = CliRunner().invoke(app, ['--help']).output\n"
        f"print(out)\nprint('LOADED', [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, check=True, env={"PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    assert "LOADED []" in result.stdout
    for name in COMMANDS:
        assert name in result.stdout


@pytest.mark.parametrize("name", list(COMMANDS))
def test_listed_help_matches_the_command(name: str) -> None:
    real = load_command(name)
    shown = " ".join(COMMANDS[name][1].split())
    assert " ".join((real.help or "").split()).startswith(shown)


def test_serve_imports_no_platform_sdk_it_does_not_run(tmp_path: Path) -> None:
    """Without SLACK_* / FEISHU_* (and no route using them) neither SDK is loaded, and the
    MCP SDK waits for the first /mcp call. Nor is what only some features use: pydantic-ai
    (no agent has run), the cipher of webhook secrets (no ASKHUMAN_SECRET_KEY), httpx (no
    webhook sent), the JSON Schema validator of edited arguments (no edit yet), cron (no
    schedule), Alembic once the database is at the newest schema."""
    unused = ("slack_bolt", "slack_sdk", "lark_oapi", "mcp", "pydantic_ai", "cryptography",
              "httpx", "jsonschema", "croniter", "alembic")
    code = (
        "import sys\nfrom bot.commands import serve_cmd\nfrom bot.settings import load_settings\n"
        "serve_cmd.prepare(load_settings(), env={})\n"
        f"print('LOADED', [m for m in {unused!r} if m in sys.modules])\n"
    )
    env = {"PYTHONPATH": str(ROOT), "ASKHUMAN_DATABASE_URL": f"sqlite:///{tmp_path}/a.db",
           "HOME": str(tmp_path)}
    from storage import upgrade

    upgrade(env["ASKHUMAN_DATABASE_URL"])  # as a restarted server finds it
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=tmp_path, check=True, env=env)
    assert "LOADED []" in result.stdout


def test_serve_freezes_the_startup_heap_before_uvicorn_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``serve`` freezes what startup built (``bot.engine.heap``) before the server takes
    its first click, so no full collection walks that heap inside a burst."""
    import gc

    import uvicorn
    from typer.testing import CliRunner

    from bot.cli import app
    from bot.engine import heap

    seen: list[tuple[bool, int]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: seen.append(
        (heap._frozen, gc.get_threshold()[0])))
    monkeypatch.setattr(heap, "_frozen", False)
    config = tmp_path / "askhuman.yaml"
    config.write_text(f"database_url: sqlite:///{tmp_path / 'a.db'}\n")
    before = gc.get_threshold()
    try:
        result = CliRunner().invoke(app, ["serve", "--config", str(config)])
        assert result.exit_code == 0, result.output
        assert seen == [(True, heap.YOUNG_GC_THRESHOLD)]
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
