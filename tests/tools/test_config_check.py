"""``askhuman config check`` on tools: each mistake names its key and the fix."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bot.cli import app
from bot.settings import ConfigError, load_file

runner = CliRunner()
ROUTES = {"ops": {"timeout": "30m", "console": {"enabled": True}},
          "security": {"timeout": "1h", "console": {"enabled": True}}}


def write(tmp_path: Path, tools: list[object]) -> Path:
    path = tmp_path / "askhuman.yaml"
    config = {"agents": {"ops": {"model": "scripted:ops", "route": "ops", "tools": tools}},
              "routes": ROUTES}
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def check(path: Path) -> tuple[int, str]:
    result = runner.invoke(app, ["config", "check", str(path)])
    return result.exit_code, result.output


def test_a_valid_tools_config_passes(tmp_path: Path) -> None:
    path = write(tmp_path, [
        {"python": "tests.tools.sample_tools:scale", "approval": {"when": "args.replicas > 3"},
         "fixed": {"cluster": "prod-eu"}, "timeout": "30s", "max_output_chars": 2000},
        {"mcp": {"command": [sys.executable, "examples/mcp_ops_server.py"], "env": ["HOME"]},
         "include": ["scale", "status"], "approval": {"when": "args.replicas > 3"},
         "prefix": "ops", "fixed": {"scale": {"service": "api"}}},
        {"mcp": {"url": "http://127.0.0.1:9000/mcp", "headers_env": {"Authorization": "HOME"}},
         "approval": "always", "route": "security"},
    ])
    code, output = check(path)
    assert code == 0, output
    assert "is valid: 1 agent(s), 2 route(s)" in output


@pytest.mark.parametrize(("tool", "expected"), [
    ({"python": "no_such_pkg.ops:restart"},
     "agents.ops.tools.0.python: cannot import module 'no_such_pkg.ops'"),
    ({"python": "tests.tools.sample_tools:nope"},
     "agents.ops.tools.0.python: module 'tests.tools.sample_tools' has no attribute 'nope'"),
    ({"python": "tests.tools.sample_tools:not_callable"},
     "agents.ops.tools.0.python: 'tests.tools.sample_tools:not_callable' is not a function"),
    ({"python": "tests.tools.sample_tools:scale", "fixed": {"region": "eu"}},
     "agents.ops.tools.0.fixed.region: tests.tools.sample_tools:scale has no parameter "
     "'region'; its parameters are: service, replicas, cluster"),
    ({"python": "tests.tools.sample_tools:scale", "fixed": {"replicas": "lots"}},
     "agents.ops.tools.0.fixed.replicas: value 'lots' does not fit the parameter's type"),
    ({"mcp": {"command": ["definitely-not-installed-mcp", "serve"]}},
     "agents.ops.tools.0.mcp.command: program 'definitely-not-installed-mcp' was not found"),
    ({"python": "tests.tools.sample_tools:scale", "approval": {"when": "args.replicas >"}},
     "agents.ops.tools.0.approval: when: does not compile as CEL"),
    ({"python": "tests.tools.sample_tools:scale", "route": "nowhere"},
     "agents.ops.tools.0.route: route 'nowhere' is not defined under routes (known routes: "
     "ops, security)"),
    ({"python": "tests.tools.sample_tools:scale", "approval": "sometimes"},
     "agents.ops.tools.0.approval: must be never, always or {when:"),
    ({"mcp": {"command": ["x"], "env": {"OPS_TOKEN": "s3cret"}}},
     "agents.ops.tools.0.mcp: env: list variable names only"),
    ({"mcp": {"url": "http://127.0.0.1:9/mcp", "headers_env": {"Authorization": "Bearer x"}}},
     "is not an environment variable name"),
    ({"mcp": {"command": ["x"]}, "approval": "never"},
     "approval other than 'always' needs an include list"),
    ({"mcp": {"command": ["x"]}, "include": ["a"], "exclude": ["b"]},
     "use include or exclude, not both"),
    ({"shell": "rm -rf /"}, "agents.ops.tools.0: each tool needs a 'python:' or an 'mcp:' key"),
])
def test_each_mistake_is_reported_with_its_key(
    tmp_path: Path, tool: dict[str, object], expected: str
) -> None:
    code, output = check(write(tmp_path, [tool]))
    assert code == 1, output
    assert expected in output, output


def test_missing_environment_variables_are_notes_not_errors(tmp_path: Path) -> None:
    path = write(tmp_path, [{"mcp": {"command": [sys.executable], "env": ["NOT_SET_IN_TESTS"]}}])
    code, output = check(path)
    assert code == 0, output
    assert ("note: agents.ops.tools.0.mcp: environment variable NOT_SET_IN_TESTS is not set "
            "here") in output


def test_settings_refuse_the_shape_errors_at_load_time_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_file(write(tmp_path, [{"python": "x:y", "approval": {"when": ")"}}]))
    assert caught.value.problems[0].startswith("agents.ops.tools.0.approval:")


def test_serve_refuses_to_start_with_a_broken_tool(tmp_path: Path) -> None:
    path = write(tmp_path, [{"python": "no_such_pkg.ops:restart"}])
    result = runner.invoke(app, ["serve", "--config", str(path)])
    assert result.exit_code == 2
    assert "agents.ops.tools.0.python: cannot import module 'no_such_pkg.ops'" in result.output
