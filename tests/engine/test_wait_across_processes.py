"""A long-poll on one process hears a decision made by another on the same SQLite file.

SQLite has no LISTEN/NOTIFY, so a process's ``Waiters`` never hear another process's
commit. When several processes share the file (``serve --workers N``, ``serve
--no-background`` beside ``askhuman worker``), ``serve`` sets ``Tuning.wait_recheck``
and the waiter re-reads its request that often. Two engines on one file stand in for
two processes: each has its own waiters, as a process would."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.engine.batch_rows import api_client, ask_tool
from tests.engine.test_click_inbox import _engine


async def test_a_long_poll_hears_another_processes_decision_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    waiting, _, _ = _engine(url)
    deciding, _, _ = _engine(url)
    waiting.tuning.wait_recheck = 0.2
    client = api_client(waiting, ["ops"])
    ref = await ask_tool(waiting, client, "ops", "deploy")
    poll = asyncio.ensure_future(waiting.wait_external(client.id, ref, 120))
    await asyncio.sleep(0)  # registered and waiting
    result = await deciding.cancel_external(client, ref, "wrong release")
    assert result.outcome == "accepted", result
    view = await asyncio.wait_for(poll, 30)  # long before the poll's own 120 s
    assert view is not None and view.status == "cancelled"


async def test_without_the_recheck_a_long_poll_returns_the_state_at_its_timeout(
    tmp_path: Path,
) -> None:
    """The bound without it (one process, the default): the poll ends at its timeout,
    and what it returns is then read fresh."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    waiting, _, _ = _engine(url)
    deciding, _, _ = _engine(url)
    client = api_client(waiting, ["ops"])
    ref = await ask_tool(waiting, client, "ops", "deploy")
    poll = asyncio.ensure_future(waiting.wait_external(client.id, ref, 1))
    await asyncio.sleep(0)
    await deciding.cancel_external(client, ref, "wrong release")
    view = await poll
    assert view is not None and view.status == "cancelled"
