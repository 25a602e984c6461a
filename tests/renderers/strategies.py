"""Hypothesis strategies: valid AskHumanToolArgs up to the hard caps, with hostile text."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from bot.askhuman.schema import AskHumanToolArgs

HOSTILE = [
    "<!channel>", "<!here|here>", "<@U123>", "<#C42>", "<!subteam^S1>", "<!date^1|x>",
    "@everyone", "@here", "@channel", "@all", "<at id=all></at>", '<at user_id="all"></at>',
    "<at email=a@b.c></at>", "<a href='https://x'>x</a>", "<link url='https://x'>",
    "<font color=red>",
    "<person id=ou_1>", "[x](javascript:alert(1))", "[y](tel:123)", "<script>", "&lt;!here&gt;",
    "&#60;at id=all&#62;", "*b*", "_i_", "~s~", "`c`", "```", "# h", "> q", "- l", "1. o",
    "| a | b |\n|---|---|\n| 1 | 2 |", "\u202e", "\x1b[31m", "&amp;", "](", "\n\n", "中文",
    "<https://ok.example|ok>", "[ok](https://ok.example)", "<mailto:a@b.c>", "\\",
]


def hostile(max_size: int, min_size: int = 1) -> st.SearchStrategy[str]:
    """Mostly corpus fragments, some random text, sometimes repeated up to ``max_size``."""
    piece = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12))
    base = st.lists(piece, min_size=1, max_size=8).map("".join)
    grown = st.tuples(base, st.integers(1, max_size)).map(lambda t: (t[0] * t[1])[:max_size])
    return st.one_of(base, grown).map(lambda s: s[:max_size]).filter(
        lambda s: len(s) >= min_size and bool(s.strip())
    )


def _options(draw: st.DrawFn) -> list[dict[str, str]]:
    count = draw(st.one_of(st.integers(1, 4), st.just(100)))
    values = draw(st.lists(hostile(300), min_size=count, max_size=count, unique=True))
    return [{"value": v, "label": draw(hostile(200))} for v in values]


@st.composite
def field(draw: st.DrawFn, name: str) -> dict[str, Any]:
    kind = draw(st.sampled_from(
        ["paragraph", "select", "file", "file-list", "multi-select", "number", "checkbox", "date"]
    ))
    out: dict[str, Any] = {"name": name, "label": draw(hostile(200)), "type": kind,
                           "required": draw(st.booleans())}
    if kind in ("select", "multi-select"):
        out["options"] = _options(draw)
        few = [o["value"] for o in out["options"][:5]]
        if kind == "select":
            out["default"] = draw(st.one_of(st.none(), st.sampled_from(few)))
        else:
            out["default"] = draw(st.one_of(st.none(), st.lists(st.sampled_from(few), unique=True)))
    elif kind == "paragraph":
        out["default"] = draw(st.one_of(st.none(), hostile(100)))
        out["placeholder"] = draw(st.one_of(st.none(), hostile(300)))
    elif kind == "number":
        num = st.one_of(st.integers(-10**9, 10**9), st.floats(-1e9, 1e9, allow_nan=False))
        out["default"] = draw(st.one_of(st.none(), num))
    elif kind == "checkbox":
        out["default"] = draw(st.one_of(st.none(), st.booleans()))
    elif kind == "date":
        out["default"] = draw(st.one_of(st.none(), st.dates().map(lambda d: d.isoformat())))
    else:
        out["max_files"] = draw(st.one_of(st.none(), st.integers(1, 20)))
    return out


@st.composite
def tool_args(draw: st.DrawFn) -> AskHumanToolArgs:
    names = draw(st.lists(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,30}", fullmatch=True),
                          max_size=16, unique=True))
    ids = draw(st.lists(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,30}", fullmatch=True),
                        min_size=1, max_size=8, unique=True))
    styles = st.sampled_from(["default", "primary", "destructive"])
    return AskHumanToolArgs.model_validate({
        "title": draw(st.one_of(st.none(), hostile(300))),
        "question": draw(hostile(4000)),
        "markdown": draw(st.one_of(st.none(), hostile(20000))),
        "fields": [draw(field(n)) for n in names],
        "actions": [{"id": i, "label": draw(hostile(120)), "style": draw(styles)} for i in ids],
        "urgency": draw(st.sampled_from(["normal", "high"])),
    })


BLOCKY = ["```\n", "```py\n", "~~~\n", "\n    code\n", "| a | b |\n", "|---|---|\n",
          "| 1 | 2 |\n", "Title\n", "===\n", "---\n", "> q\n", "lazy\n", "\n\n", "- a\n",
          "  - b\n", "1. c\n", "2) d\n", "\n  cont\n", "# h\n", "***\n", "para\n"]
"""Pieces that start, continue and end Markdown blocks: random bodies made of them (and
of inline pieces) put block boundaries everywhere."""
