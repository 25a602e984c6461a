"""The framework integration tests: each framework runs here, in its own venv, and talks
to a served askhuman over loopback HTTP, exactly as an agent in another process would.

The served askhuman (``tests/fakes/served_askhuman.py`` in the repository) runs in a
subprocess of the *server's* venv (``ASKHUMAN_SERVER_PYTHON``, default ``.venv`` at the
repository root), so this venv holds only the client package and the frameworks.
``askhuman`` also plays Alice in Slack (``served.Served``): it sees the cards and clicks
them, signed like Slack signs its requests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(os.environ.get("ASKHUMAN_REPO", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree's askhuman_client

from served import Served  # noqa: E402


def _server_python() -> str:
    return os.environ.get("ASKHUMAN_SERVER_PYTHON", str(REPO / ".venv" / "bin" / "python"))


@pytest.fixture(scope="session")
def askhuman() -> Iterator[Served]:
    """One served askhuman for the session; each test reads only the cards it made."""
    proc = subprocess.Popen(
        [_server_python(), "-m", "tests.fakes.served_askhuman"], cwd=REPO,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "SKIP_SLACK_SDK_WARNING": "1"})
    assert proc.stdout is not None and proc.stdin is not None
    try:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the served askhuman exited ({proc.wait(10)}); see its stderr")
        info = json.loads(line)
        yield Served(info["url"], info["api_key"], info["control"])
    finally:
        try:  # closing its stdin (communicate does) tells it to stop
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
