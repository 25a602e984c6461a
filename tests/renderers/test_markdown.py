"""Markdown conversion details: formatting, links, tables, splitting, truncation."""

from __future__ import annotations

from renderers.markdown import (
    FEISHU,
    SLACK,
    clean,
    feishu_escape,
    fit_chunks,
    markdown_chunks,
    markdown_units,
    plain,
    slack_escape,
    split_units,
    truncate,
)


def test_slack_formatting() -> None:
    units = markdown_units("# Title\n\n**b** *i* ~~s~~ `c<d>`\n\n- a\n  - b\n1. x", SLACK)
    assert units == ["*Title*", "*b* _i_ ~s~ `c&lt;d&gt;`", "• a\n    ◦ b", "1. x"]


def test_feishu_formatting_and_escaping() -> None:
    units = markdown_units("## T\n\n**b** [l](https://e.com/a_b) 3*4", FEISHU)
    assert units == ["**T**", "**b** [l](https://e.com/a_b) 3&#42;4"]


def test_links_only_for_safe_schemes() -> None:
    md = "[a](https://x.io/p|q>r) [m](mailto:a@b.c) [t](tel:123) <ftp://h/f>"
    (unit,) = markdown_units(md, SLACK)
    assert "<https://x.io/p%7Cq%3Er|a>" in unit
    assert "<mailto:a@b.c|m>" in unit
    assert "t (tel:123)" in unit and "ftp://h/f" in unit and "<ftp" not in unit


def test_tables_become_rows() -> None:
    (unit,) = markdown_units("| a | b |\n|---|---|\n| 1 | 2 |", SLACK)
    assert unit == "*a* | *b*\n1 | 2"


def test_escapes() -> None:
    assert slack_escape("a & <b> @here") == "a &amp; &lt;b&gt; @\u2060here"
    assert feishu_escape("<at>") == "&#60;at&#62;"
    assert plain("<!here> <at id=1>") == "<\u2060!here> <\u2060at id=1>"
    assert clean("a\x1b[31m\u202eb") == "a[31mb"


def test_split_prefers_paragraphs() -> None:
    units = ["a" * 10, "b" * 10, "c" * 10]
    assert split_units(units, 22) == ["a" * 10 + "\n\n" + "b" * 10, "c" * 10]
    long = ("word " * 2000).strip()
    chunks = split_units([long], 3000)
    assert all(len(c) <= 3000 for c in chunks) and len(chunks) == 4


def test_truncate_and_fit() -> None:
    assert truncate("abcdef", 4) == "abc…"
    assert truncate("a&amp;b", 4) == "a…"
    assert fit_chunks(["x" * 100, "y" * 100], 150)[-1].endswith("…")
    chunks = markdown_chunks("p\n\n" * 5000, SLACK, 3000, 1000)
    assert sum(map(len, chunks)) <= 1000
