"""``editable`` in a tool entry: refusals name the key and the fix."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.tools.build import build_agent_tools
from bot.tools.config import McpToolSettings, PythonToolSettings
from bot.tools.python import ToolConfigError


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
