"""The house rules of ``docs/architecture.md``, checked on the source itself.

Each rule here is one a reviewer would otherwise have to remember: layers import only
downwards, there are no import circles, the engine is composed (no mixins, no class with
two project bases, no ``engine: Any``), the engine never names a platform, and no source
file grows past ~500 lines.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bot", "renderers", "storage")
MAX_LINES = 500
DATA_CATALOGUES = {"renderers/i18n.py", "renderers/catalog_en.py", "renderers/catalog_zh.py"}
"""Word lists, not logic: allowed to be long."""
PLATFORM_NAMES = {"slack", "feishu", "lark", "console"}


def _sources() -> Iterator[Path]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level_imports(path: Path) -> set[str]:
    """Modules imported when ``path`` is imported (not under TYPE_CHECKING, not inside
    functions: those cannot form a circle at import time)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(getattr(node, "orelse", []))

    visit(tree.body)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module(path): path for path in _sources()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m in _top_level_imports(path) if m in modules and m != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the modules along it (None: there is none).

    A package's ``__init__`` importing its own submodules is how packages re-export, not
    a circle, so edges from a package to its children are left out."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if target.startswith(node + "."):
                continue
            if state.get(target) == 1:
                return [*stack[stack.index(target):], target]
            if target not in state and (found := walk(target)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := walk(node)) is not None:
            return found
    return None


def test_there_are_no_import_circles() -> None:
    assert _cycle(_graph()) is None


def test_the_circle_finder_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"p": {"p.x"}, "p.x": {"p"}}) is None  # a package and its child


@pytest.mark.parametrize(("layer", "may_not_import"), [
    ("renderers", ("bot.engine", "bot.platforms", "bot.api", "storage")),
    ("storage", ("bot", "renderers")),
    ("bot.engine", ("bot.platforms", "bot.api", "bot.mcp", "bot.commands", "bot.web")),
    ("bot.askhuman", ("bot.engine", "bot.platforms", "storage", "renderers")),
])
def test_layers_import_only_downwards(layer: str, may_not_import: tuple[str, ...]) -> None:
    wrong = []
    for path in _sources():
        name = _module(path)
        if name != layer and not name.startswith(layer + "."):
            continue
        for imported in _top_level_imports(path) | _function_imports(path):
            if any(imported == bad or imported.startswith(bad + ".") for bad in may_not_import):
                wrong.append(f"{name} imports {imported}")
    assert wrong == []


def _function_imports(path: Path) -> set[str]:
    return {node.module or "" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and not node.level}


def test_no_source_file_is_over_500_lines() -> None:
    long = [f"{path.relative_to(ROOT)}: {n}" for path in _sources()
            if (n := len(path.read_text().splitlines())) > MAX_LINES
            and str(path.relative_to(ROOT)) not in DATA_CATALOGUES]
    assert long == []


def _engine_classes() -> Iterator[tuple[Path, ast.ClassDef]]:
    for path in sorted((ROOT / "bot" / "engine").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                yield path, node


def test_the_engine_is_composed_not_inherited() -> None:
    """No mixins, and no engine class with more than one base of the project's own."""
    project = {node.name for _, node in _engine_classes()}
    wrong = []
    for path, node in _engine_classes():
        mine = [ast.unparse(base) for base in node.bases if ast.unparse(base) in project]
        if "Mixin" in node.name or len(mine) > 1 or (mine and path.name == "core.py"):
            wrong.append(f"{path.name}: class {node.name}({', '.join(mine)})")
    assert wrong == []


def test_no_function_takes_an_untyped_engine() -> None:
    wrong = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.arg) and node.arg in ("engine", "_engine") \
                    and node.annotation is not None \
                    and ast.unparse(node.annotation) in ("Any", "'Any'"):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.arg}")
    assert wrong == []


def _strings(tree: ast.AST) -> Iterator[ast.Constant]:
    """String constants that are not docstrings."""
    docstrings = {id(body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                                | ast.AsyncFunctionDef)
                  and (body := node.body) and isinstance(body[0], ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            yield node


def test_the_engine_never_names_a_platform() -> None:
    """A platform difference is a capability the adapter declares or a setting of the
    route's platform section, never ``if platform == "feishu"`` in the engine."""
    wrong = []
    for path in sorted((ROOT / "bot" / "engine").glob("*.py")):
        for node in _strings(ast.parse(path.read_text())):
            if node.value.lower() in PLATFORM_NAMES:
                wrong.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert wrong == []


@pytest.mark.parametrize("module", sorted(_module(path) for path in _sources()))
def test_every_module_imports(module: str) -> None:
    """mypy skips modules it cannot find (``ignore_missing_imports``), so a stale import
    of a moved module would only show at run time: import each one here."""
    importlib.import_module(module)
