"""``routes.<name>.grants`` and a tool's ``grant_scope``: config errors name the key and
the fix; the card's presets are cut at the route's limits."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from bot.settings import ConfigError
from bot.settings.load import _parse
from renderers.card import GrantOffer
from renderers.tool_card import duration_choices, grant_fields, uses_choices


def _error(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        _parse(yaml.safe_load(text), "askhuman.yaml")
    return str(caught.value)


@pytest.mark.parametrize(("grants", "expected"), [
    ("{max_duration: 8h, max_uses: 0}",
     "routes.ops.grants.max_uses: must be a whole number of uses, at least 1"),
    ("{max_duration: soon, max_uses: 5}",
     'routes.ops.grants.max_duration: write a duration like "30m"'),
    ("{max_uses: 5}", "routes.ops.grants.max_duration: required key is missing"),
    ("{max_duration: 8h, max_uses: 5, uses: 1}", "routes.ops.grants.uses: unknown key"),
])
def test_grant_limits_errors_name_the_key_and_the_fix(grants: str, expected: str) -> None:
    text = f"routes: {{ops: {{console: {{enabled: true}}, grants: {grants}}}}}"
    assert expected in _error(text)


def test_a_grant_scope_that_does_not_compile_is_a_config_error() -> None:
    text = """
agents:
  ops:
    model: scripted:ops
    route: ops
    tools:
      - python: tests.tools.sample_tools:scale
        grant_scope: "args.service == == call.service"
routes: {ops: {console: {enabled: true}}}
"""
    assert "agents.ops.tools.0.grant_scope: does not compile as CEL" in _error(text)


def test_valid_grants_and_scope_load() -> None:
    data: dict[str, Any] = yaml.safe_load("""
agents:
  ops:
    model: scripted:ops
    route: ops
    tools:
      - {python: "tests.tools.sample_tools:scale", grant_scope: "args.service == call.service"}
routes: {ops: {console: {enabled: true}, grants: {max_duration: 8h, max_uses: 50}}}
""")
    parsed = _parse(data, "askhuman.yaml")
    limits = parsed.routes["ops"].grants
    assert limits is not None and (limits.max_duration, limits.max_uses) == (28800, 50)
    assert parsed.agents["ops"].tools[0].grant_scope == "args.service == call.service"


def test_presets_are_cut_at_the_limits_plus_the_limit_itself() -> None:
    assert duration_choices(8 * 3600) == [900, 3600, 4 * 3600, 8 * 3600]
    assert duration_choices(7200) == [900, 3600, 7200]
    assert duration_choices(600) == [600]
    assert uses_choices(50) == [1, 5, 10, 25, 50]
    assert uses_choices(7) == [1, 5, 7]
    assert uses_choices(1000) == [1, 5, 10, 25, 50, 100, 1000]
    duration, uses = grant_fields(GrantOffer(600, 3))
    assert (duration.default, uses.default) == ("600", "3")  # type: ignore[union-attr]
    duration, uses = grant_fields(GrantOffer(86400, 50))
    assert (duration.default, uses.default) == ("3600", "10")  # type: ignore[union-attr]


def test_the_offer_survives_storage_and_speaks_the_routes_language() -> None:
    import dataclasses

    from bot.engine.cards import localized
    from renderers.tool_card import (
        tool_approval_card,
        tool_approval_view,
        view_from_json,
        view_to_json,
    )

    view = dataclasses.replace(tool_approval_view("scale", "", {"service": "web"}, {}, "b" * 64),
                               grant=GrantOffer(3600, 5), grant_scope="args.x == call.x")
    stored = view_from_json(view_to_json(view))
    assert (stored.grant, stored.grant_scope) == (GrantOffer(3600, 5), "args.x == call.x")
    card = tool_approval_card("REF", stored, "ops")
    assert [a.id for a in card.args.actions] == ["approve", "approve_grant", "reject"]
    assert "where args.x == call.x" in card.args.question

    class Route:
        locale = "zh-CN"
        timezone = None

    chinese = localized(card, Route())
    assert [a.label for a in chinese.args.actions] == ["批准", "批准并允许类似调用…", "拒绝"]
    assert [f.name for f in chinese.args.fields] == ["reason", "grant_duration", "grant_uses"]
    plain = view_from_json({k: v for k, v in view_to_json(view).items()
                            if k not in ("grant_offer", "grant_scope")})
    assert [a.id for a in tool_approval_card("R", plain, "ops").args.actions] == [
        "approve", "reject"]
