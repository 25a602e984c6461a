"""The console platform prints model-written text to a terminal."""

from __future__ import annotations


def test_console_output_never_carries_terminal_escapes() -> None:
    """The agent's final output is model-written; the demo prints it to a terminal."""
    import asyncio
    import io

    from bot.engine.ports import Origin
    from bot.platforms.console import ConsoleAdapter

    out = io.StringIO()
    adapter = ConsoleAdapter(out=out)
    evil = "done\x1b]0;pwned\x07\x1b[2J\u202e <!channel> <at id=all></at>"
    asyncio.run(adapter.post_run_result(Origin("console"), evil))
    printed = out.getvalue()
    assert "done" in printed
    assert not any(c in printed for c in "\x1b\x07\u202e")
    assert "<!channel>" not in printed and "<at" not in printed
