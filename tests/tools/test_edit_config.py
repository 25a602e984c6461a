"""``editable`` in a tool entry: refusals name the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.tools.build import build_agent_tools
from bot.tools.config import McpToolSettings, PythonToolSettings
from bot.tools.python import ToolConfigError
from tests.tools.test_config_check import check, write
from tests.tools.test_config_check_names import stdio


def test_an_argument_cannot_be_fixed_and_editable() -> None:
    with pytest.raises(ValidationError, match=r"editable: cluster is also in fixed; .* "
                                              r"remove it from one of the two"):
        PythonToolSettings.model_validate({"python": "tests.tools.sample_tools:scale",
                                           "fixed": {"cluster": "x"},
                                           "editable": ["cluster"]})
    with pytest.raises(ValidationError, match=r"editable.scale: cluster is also in fixed"):
        McpToolSettings.model_validate({"mcp": {"command": ["x"]}, "include": ["scale"],
                                        "fixed": {"scale": {"cluster": "x"}},
                                        "editable": {"scale": ["cluster"]}})


def test_editable_names_an_exposed_tool_and_a_real_parameter() -> None:
    with pytest.raises(ValidationError, match=r"editable: status is not exposed"):
        McpToolSettings.model_validate({"mcp": {"command": ["x"]}, "include": ["scale"],
                                        "editable": {"status": ["x"]}})
    entry = PythonToolSettings.model_validate({"python": "tests.tools.sample_tools:scale",
                                               "editable": ["replica"]})
    with pytest.raises(ToolConfigError) as caught:
        build_agent_tools("ops", [entry])
    assert caught.value.key == "tools.0.editable.replica"
    assert "has no parameter 'replica'" in str(caught.value)


def test_config_check_holds_mcp_editable_names_to_the_servers_schema(tmp_path: Path) -> None:
    code, output = check(write(tmp_path, [stdio(include=["scale", "status"],
                                                editable={"scale": ["replicas", "replica"]})]))
    assert code == 1, output
    assert ("agents.ops.tools.0.editable.scale.replica: the tool has no parameter 'replica'; "
            "its parameters are: service, replicas") in output
    assert "editable.scale.replicas:" not in output
    code, output = check(write(tmp_path, [stdio(include=["scale"],
                                                editable={"scale": ["replicas"]})]))
    assert code == 0, output


def test_the_note_follows_the_tools_return_whatever_its_type() -> None:
    from bot.tools.edits import note_for, with_note

    note = note_for({"replicas": 10}, {"replicas": 5}, "Alice")
    assert note == ("Note: a reviewer edited the arguments before approving (Alice): "
                    "replicas 10 → 5. The call ran with the edited arguments.")
    assert with_note("done", note) == f"done\n\n{note}"
    assert with_note({"ok": True}, note) == f'{{"ok": true}}\n\n{note}'
    assert with_note("done", None) == "done"
