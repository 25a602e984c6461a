"""The real Claude Code CLI (``claude -p``) with ``--permission-prompt-tool
mcp__askhuman__request_approval``: its tool calls wait for a click in the fake Slack, and
it honours the answer (allow, allow as edited, deny with the reason, timeout).

Claude Code talks to ``FakeAnthropic`` (a scripted model on loopback) instead of
Anthropic's API, and runs only inside a network namespace of its own that has nothing
but loopback (``unshare -n``): it cannot reach any other address, whatever it tries.
So ``test_real_claude_code`` starts this same file again inside such a namespace, where
the ``test_inside_*`` tests run; outside one they are skipped.

Skipped without Claude Code: ``scripts/install-claude-code.sh`` installs the pinned
version into ``.claude-code/`` (gitignored); ``ASKHUMAN_CLAUDE`` may name another binary.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import Client, Door
from tests.api.test_claude_code import click, edit_and_approve
from tests.api.test_mcp import ROOT, card_for
from tests.fakes.anthropic_api import FINAL_PREFIX, FakeAnthropic

CLAUDE_ENV = "ASKHUMAN_CLAUDE"
INSTALLED = ROOT / ".claude-code" / "node_modules" / ".bin" / "claude"
INSIDE_ENV = "ASKHUMAN_CLAUDE_NETNS"
FIN = "C0FIN"
QUICK = "C0QUICK"


def claude_binary() -> str | None:
    named = os.environ.get(CLAUDE_ENV)
    if named:
        return named
    return str(INSTALLED) if INSTALLED.exists() else shutil.which("claude")


def only_loopback() -> bool:
    """True inside a network namespace whose only interface is ``lo``."""
    try:
        return [name for _index, name in socket.if_nameindex()] == ["lo"]
    except OSError:
        return False


REQUIRE_ENV = "ASKHUMAN_REQUIRE_CLAUDE_CODE"
NOT_INSTALLED = ("Claude Code is not installed: run scripts/install-claude-code.sh "
                 f"(or set {CLAUDE_ENV} to a claude binary)")
inside = pytest.mark.skipif(
    os.environ.get(INSIDE_ENV) != "1" or not only_loopback() or claude_binary() is None,
    reason="runs only inside the loopback-only network namespace that "
           "test_real_claude_code makes")


@pytest.mark.timeout(600)
def test_real_claude_code() -> None:
    """Run the ``test_inside_*`` tests in a new network namespace (loopback only)."""
    binary = claude_binary()
    if binary is None:
        if os.environ.get(REQUIRE_ENV) == "1":  # CI installs it: a skip would hide a gap
            pytest.fail(NOT_INSTALLED)
        pytest.skip(NOT_INSTALLED)
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip (util-linux, iproute2) to run Claude Code in a "
                    "network namespace with nothing but loopback")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip("cannot make a network namespace (unshare -n needs root or user "
                    "namespaces); Claude Code runs only where it can reach nothing but "
                    f"loopback: {probe.stderr.decode(errors='replace').strip()}")
    env = {**os.environ, INSIDE_ENV: "1", CLAUDE_ENV: binary, "PYTHONPATH": str(ROOT)}
    command = (f"ip link set lo up && exec {sys.executable} -m pytest -q -p no:cacheprovider "
               f"{Path(__file__).relative_to(ROOT)} -k test_inside")
    done = subprocess.run(["unshare", "-n", "sh", "-c", command], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    tail = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, tail
    assert " passed" in tail and "skipped" not in tail.splitlines()[-1], tail


@dataclass
class Run:
    """One ``claude -p`` run: its JSON result, what the model was told, the project."""

    result: dict[str, Any]
    tool_result: dict[str, Any]
    project: Path
    fake: FakeAnthropic


def stdio_config(door: Door, client: Client, *args: str) -> dict[str, Any]:
    """``.mcp.json`` for ``askhuman mcp`` over stdio (as in the docs, with this checkout's
    Python instead of an installed ``askhuman``)."""
    return {"mcpServers": {"askhuman": {
        "command": sys.executable, "args": ["-m", "bot.cli", "mcp", *args],
        "env": {"ASKHUMAN_URL": door.url, "ASKHUMAN_API_KEY": client.key,
                "PYTHONPATH": str(ROOT)}}}}


def http_config(door: Door, client: Client, query: str) -> dict[str, Any]:
    return {"mcpServers": {"askhuman": {
        "type": "http", "url": f"{door.url}/mcp?{query}",
        "headers": {"Authorization": f"Bearer {client.key}"}}}}


async def claude(tmp_path: Path, config: dict[str, Any], tool: str, tool_input: dict[str, Any],
                 decide: Any) -> Run:
    """``claude -p`` in a fresh project whose ``.mcp.json`` is ``config``; the model calls
    ``tool`` once; ``decide()`` clicks meanwhile."""
    project = tmp_path / "project"
    home = tmp_path / "home"
    project.mkdir()
    home.mkdir()
    (project / ".mcp.json").write_text(json.dumps(config))
    with FakeAnthropic(tool, tool_input) as fake:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
               "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"}
        process = await asyncio.create_subprocess_exec(
            str(claude_binary()), "-p", "Do the thing.", "--output-format", "json",
            "--mcp-config", ".mcp.json", "--strict-mcp-config",
            "--permission-prompt-tool", "mcp__askhuman__request_approval",
            cwd=project, env=env, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        try:
            await decide()
            out, err = await asyncio.wait_for(process.communicate(), 90)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 0, err.decode(errors="replace")
    result = json.loads(out)
    assert result["result"].startswith(FINAL_PREFIX), result
    return Run(result, json.loads(result["result"][len(FINAL_PREFIX):]), project, fake)


async def request_view(door: Door, client: Client) -> dict[str, Any]:
    listed = (await door.http.get(door.api("/requests"), headers=client.headers)).json()
    item: dict[str, Any] = listed["items"][0]
    return item


@inside
async def test_inside_allow_runs_the_command(door: Door, ci: Client, tmp_path: Path) -> None:
    async def approve() -> None:
        ts = await card_for(door, "echo approved", FIN)
        await click(door, ts, "Approve", "fine")

    run = await claude(tmp_path, stdio_config(door, ci, "--route", "fin"), "Bash",
                       {"command": "echo approved > out.txt", "description": "Write a file"},
                       approve)
    assert (run.project / "out.txt").read_text() == "approved\n"
    assert not run.tool_result.get("is_error")
    assert run.result["permission_denials"] == []
    view = await request_view(door, ci)
    assert view["tool_name"] == "Bash" and view["status"] == "submitted"
    assert view["updated_input"] == {"command": "echo approved > out.txt",
                                     "description": "Write a file"}


@inside
async def test_inside_edit_runs_the_edited_command(
    door: Door, ci: Client, tmp_path: Path
) -> None:
    async def edit() -> None:
        ts = await card_for(door, "echo as-asked", FIN)
        await edit_and_approve(door, ts, {"command": "echo as-edited > out.txt"})

    config = stdio_config(door, ci, "--route", "fin", "--editable", "Bash:command")
    run = await claude(tmp_path, config, "Bash",
                       {"command": "echo as-asked > out.txt", "description": "Write a file"},
                       edit)
    assert (run.project / "out.txt").read_text() == "as-edited\n"
    assert not run.tool_result.get("is_error")


@inside
async def test_inside_deny_tells_claude_why(door: Door, ci: Client, tmp_path: Path) -> None:
    async def reject() -> None:
        ts = await card_for(door, "echo rejected", FIN)
        await click(door, ts, "Reject", "not on a Friday")

    run = await claude(tmp_path, stdio_config(door, ci, "--route", "fin"), "Bash",
                       {"command": "echo rejected > out.txt", "description": "Write a file"},
                       reject)
    assert not (run.project / "out.txt").exists()
    assert run.tool_result["is_error"] is True  # the model sees the message as the result
    assert run.tool_result["content"] == "Rejected by u0alice in Slack: not on a Friday"
    [denial] = run.result["permission_denials"]
    assert denial["tool_name"] == "Bash"


@inside
async def test_inside_timeout_is_a_deny(door: Door, ci: Client, tmp_path: Path) -> None:
    async def nobody() -> None:
        await card_for(door, "echo late", QUICK)

    run = await claude(tmp_path, stdio_config(door, ci, "--route", "quick",
                                              "--progress-seconds", "0.3"), "Bash",
                       {"command": "echo late > out.txt", "description": "Write a file"},
                       nobody)
    assert not (run.project / "out.txt").exists()
    assert run.tool_result["is_error"] is True
    assert run.tool_result["content"].startswith(
        "Nobody approved or rejected this Bash call before the approval deadline (")
    assert (await request_view(door, ci))["status"] == "timeout"


@inside
async def test_inside_write_over_http(door: Door, ci: Client, tmp_path: Path) -> None:
    async def approve() -> None:
        ts = await card_for(door, "notes.txt", FIN)
        card = str(door.slack.card_message(ts, FIN).blocks)
        assert "Approve tool call: Write" in card and "Edit and approve" in card
        await edit_and_approve(door, ts, {"content": "edited in Slack\n"})

    config = http_config(door, ci, "route=fin&editable=Write:content")
    run = await claude(tmp_path, config, "Write",
                       {"file_path": str(tmp_path / "project" / "notes.txt"),
                        "content": "from Claude\n"}, approve)
    assert (run.project / "notes.txt").read_text() == "edited in Slack\n"
    assert not run.tool_result.get("is_error")
