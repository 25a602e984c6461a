"""``askhuman config check`` lists each MCP server once: a tool name two entries share
and a ``fixed`` argument the server's tool does not take are refused before any run."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.tools.mcp_server import STDIO_COMMAND, free_port
from tests.tools.test_config_check import check, write

SERVER = " ".join(STDIO_COMMAND[:3])


def stdio(**entry: object) -> dict[str, object]:
    return {"mcp": {"command": STDIO_COMMAND}, **entry}


def test_two_servers_sharing_a_tool_name_are_refused_with_the_fix(tmp_path: Path) -> None:
    code, output = check(write(tmp_path, [stdio(), stdio(exclude=["crash"])]))
    assert code == 1, output
    assert (f"agents.ops.tools.1 ({'MCP server ' + SERVER}) and agents.ops.tools.0 "
            f"({'MCP server ' + SERVER}) both give the model a tool called") in output
    assert "set `prefix: <name>` on one of them" in output


def test_with_a_prefix_on_one_server_the_config_is_valid(tmp_path: Path) -> None:
    code, output = check(write(tmp_path, [stdio(), stdio(prefix="green")]))
    assert code == 0, output


def test_include_lists_that_share_a_name_are_refused_without_reaching_anything(
    tmp_path: Path
) -> None:
    unreachable = f"http://127.0.0.1:{free_port()}/mcp"
    code, output = check(write(tmp_path, [
        {"mcp": {"url": unreachable}, "include": ["scale"]},
        {"python": "tests.tools.sample_tools:scale"}]))
    assert code == 1, output
    assert ("agents.ops.tools.1 (Python tool tests.tools.sample_tools:scale) and "
            f"agents.ops.tools.0 (MCP server {unreachable}) both give the model a tool "
            "called 'scale'; set `prefix: <name>` on the MCP server at agents.ops.tools.0 or "
            "`name:` on the Python tool") in output


def test_a_python_tool_and_a_listed_mcp_tool_sharing_a_name_are_refused(
    tmp_path: Path
) -> None:
    code, output = check(write(tmp_path, [{"python": "tests.tools.sample_tools:scale"},
                                          stdio()]))
    assert code == 1, output
    assert "both give the model a tool called 'scale'" in output


def test_fixed_arguments_are_checked_against_the_servers_schema(tmp_path: Path) -> None:
    code, output = check(write(tmp_path, [stdio(
        include=["scale", "status"],
        fixed={"scale": {"cluster": "eu", "replicas": "lots"}, "status": {"service": "api"}})]))
    assert code == 1, output
    assert ("agents.ops.tools.0.fixed.scale.cluster: the tool has no parameter 'cluster'; "
            "its parameters are: service, replicas") in output
    assert "agents.ops.tools.0.fixed.scale.replicas: value 'lots' does not fit" in output
    assert "fixed.status" not in output


def test_an_unreachable_server_is_a_note_and_the_run_checks_again(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    code, output = check(write(tmp_path, [{"mcp": {"url": url}}, stdio(prefix="ops")]))
    assert code == 0, output
    assert ("note: agents.ops.tools.0.mcp: could not list the server's tools here") in output
    assert "checked when a run starts" in output


def test_a_server_that_exits_at_once_is_a_note(tmp_path: Path) -> None:
    code, output = check(write(tmp_path, [
        {"mcp": {"command": [sys.executable, "-c", "pass"]}}]))
    assert code == 0, output
    assert "could not list the server's tools here" in output
