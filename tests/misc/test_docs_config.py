"""The configs the docs show are valid: what a newcomer copies from the front page loads.

The README's minimal config and the full example in docs/configuration.md must pass
``askhuman config check --strict`` (no errors, no warnings such as an agent nobody may
start), so the docs cannot drift from the settings' schema unnoticed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from bot.cli import app

ROOT = Path(__file__).resolve().parents[2]


def first_yaml_block(path: Path) -> str:
    """The first fenced ``yaml`` block of a Markdown file."""
    for token in MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8")):
        if token.type == "fence" and token.info.strip() == "yaml":
            return token.content
    raise AssertionError(f"{path.name} has no yaml block")


@pytest.mark.parametrize("page", ["README.md", "docs/configuration.md"])
def test_shown_config_passes_a_strict_check(page: str, tmp_path: Path) -> None:
    config = tmp_path / "askhuman.yaml"
    config.write_text(first_yaml_block(ROOT / page), encoding="utf-8")
    result = CliRunner().invoke(app, ["config", "check", str(config), "--strict"])
    assert result.exit_code == 0, result.output
    assert "is valid: 1 agent(s)" in result.output
