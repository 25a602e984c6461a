"""``bot/settings/`` imports point one way: leaf sections → ``file`` / ``effective`` →
``load``, so a section can be read and tested without the rest and no circle can form."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "bot" / "settings"
LAYER = {
    "base": 0, "durations": 1,
    "routes": 2, "rules": 2, "api": 2, "operations": 2, "people": 2, "schedules": 2,
    "agents": 3, "tools": 4, "file": 5, "effective": 5, "load": 6,
}
"""A module may import only modules of a lower layer."""


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found |= {n.removeprefix("bot.settings.") for n in names
                  if n.startswith("bot.settings.")}
        assert "bot.settings" not in names, f"{path.name} imports the package itself"
    return found


def test_every_module_has_a_layer() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == set(LAYER)


def test_imports_point_down_only() -> None:
    for name, layer in LAYER.items():
        for target in _imports(PACKAGE / f"{name}.py"):
            assert LAYER[target] < layer, f"bot.settings.{name} imports {target}"


def test_no_module_over_500_lines() -> None:
    for path in PACKAGE.glob("*.py"):
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 500, path.name
