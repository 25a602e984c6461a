"""``askhuman preview``."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from bot.commands import preview_cmd
from tests.renderers.cases import DEPLOY

app = typer.Typer()
preview_cmd.register(app)


@app.callback()
def _root() -> None:
    """Keep ``preview`` a named sub-command."""


def _run(tmp_path: Path, data: object, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "args.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    result = CliRunner().invoke(app, ["preview", str(path), *extra])
    return result.exit_code, result.stdout, result.stderr


def test_platforms(tmp_path: Path) -> None:
    code, out, _ = _run(tmp_path, DEPLOY, "--platform", "slack")
    assert code == 0 and json.loads(out)["blocks"][0]["type"] == "header"
    code, out, _ = _run(tmp_path, DEPLOY, "--platform", "feishu")
    assert code == 0 and json.loads(out)["schema"] == "2.0"
    code, out, _ = _run(tmp_path, DEPLOY, "--platform", "text")
    assert code == 0 and "1. Approve" in out


def test_invalid_args_exit_2(tmp_path: Path) -> None:
    code, _, err = _run(tmp_path, {"question": " "})
    assert code == 2 and "question must not be blank" in err
    code, _, err = _run(tmp_path, "{nope")
    assert code == 2 and "not valid JSON" in err


def test_file_fields_need_flag(tmp_path: Path) -> None:
    data = {"question": "q", "fields": [{"name": "f", "label": "F", "type": "file"}]}
    code, _, err = _run(tmp_path, data)
    assert code == 2 and "file" in err
    code, out, _ = _run(tmp_path, data, "--allow-files", "--platform", "text")
    assert code == 0 and "file upload" in out
