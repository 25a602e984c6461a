"""``askhuman serve`` runs uvicorn with httptools and uvloop (``bot.commands.http_stack``),
falls back to h11 and asyncio's loop where a wheel is missing, and refuses an explicit
choice that is not installed with the fix."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.fakes.asgi_server import free_port

ROOT = Path(__file__).resolve().parents[2]
BLOCK_WHEELS = "import sys\nsys.modules['httptools'] = None\nsys.modules['uvloop'] = None\n"
"""What a platform without the wheels has: both imports fail."""


def _serve(tmp_path: Path, prelude: str = "", *flags: str) -> tuple[dict[str, str], int]:
    """Run the real ``serve`` until ``/healthz`` answers, stop it; its ``serving`` log
    line and the health check's status."""
    port = free_port()
    code = (f"{prelude}import sys\nsys.argv = ['askhuman', 'serve', '--port', '{port}', "
            f"*{list(flags)!r}]\nfrom bot.cli import main\nmain()\n")
    env = {"PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
           "ASKHUMAN_DATABASE_URL": f"sqlite:///{tmp_path / 'a.db'}"}
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    status = 0
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and not status:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/healthz").status_code
            except httpx.TransportError:
                time.sleep(0.1)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    lines = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    serving = [line for line in lines if line.get("msg") == "serving"]
    assert serving, out.decode()[-2000:]
    return serving[0], status


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop has no Windows wheel")
def test_serve_runs_on_httptools_and_uvloop(tmp_path: Path) -> None:
    serving, status = _serve(tmp_path)
    assert (serving["http"], serving["loop"]) == ("httptools", "uvloop")
    assert status == 200


def test_serve_falls_back_to_h11_and_asyncio_without_the_wheels(tmp_path: Path) -> None:
    serving, status = _serve(tmp_path, BLOCK_WHEELS)
    assert (serving["http"], serving["loop"]) == ("h11", "asyncio")
    assert status == 200


def test_an_explicit_choice_is_what_serves(tmp_path: Path) -> None:
    serving, status = _serve(tmp_path, "", "--http", "h11", "--loop", "asyncio")
    assert (serving["http"], serving["loop"]) == ("h11", "asyncio")
    assert status == 200


@pytest.mark.parametrize("command", ["serve", "worker"])
@pytest.mark.parametrize(("option", "module"), [("--http", "httptools"),
                                                ("--loop", "uvloop")])
def test_a_missing_wheel_named_explicitly_is_refused_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, command: str, option: str, module: str,
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    result = CliRunner().invoke(app, [command, option, module])
    assert result.exit_code == 2
    shown = " ".join(result.output.replace("│", " ").split())
    assert f"pip install {module}" in shown and f"{option} auto" in shown


def test_an_unknown_choice_is_refused() -> None:
    result = CliRunner().invoke(app, ["serve", "--loop", "trio"])
    assert result.exit_code == 2
    assert "not one of auto, uvloop, asyncio" in " ".join(result.output.split())
