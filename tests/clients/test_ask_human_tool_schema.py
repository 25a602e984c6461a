"""The ask_human tool schema shipped in ``askhuman-client`` is the server's own.

``askhuman_client.pydantic_ai.ask_human_tool()`` gives remote pydantic-ai agents the
external ``ask_human`` tool from ``askhuman_client/ask_human_v1.json``, so an agent
can be built without reaching the server. The client must not import the server, so
this test (which may) holds the file to what askhuman's own agents show models: Dify's
ask_human v1 args under Dify's default guardrails, with the same name and description.
Regenerate with ``python -m tests.clients.test_ask_human_tool_schema`` after a change.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from bot.askhuman.config import AskHumanConfig
from bot.askhuman.tool import tool_parameters_schema


def expected() -> dict[str, Any]:
    config = AskHumanConfig()
    return {"name": config.tool_name, "description": config.effective_description,
            "parameters": tool_parameters_schema(config)}


def shipped_text() -> str:
    return resources.files("askhuman_client").joinpath("ask_human_v1.json").read_text("utf-8")


def render(spec: dict[str, Any]) -> str:
    return json.dumps(spec, indent=1, sort_keys=True) + "\n"


def test_the_shipped_ask_human_schema_is_the_servers() -> None:
    assert json.loads(shipped_text()) == expected()


def test_the_shipped_file_is_as_the_generator_writes_it() -> None:
    assert shipped_text() == render(expected())


if __name__ == "__main__":
    target = resources.files("askhuman_client").joinpath("ask_human_v1.json")
    with resources.as_file(target) as path:
        path.write_text(render(expected()), encoding="utf-8")
