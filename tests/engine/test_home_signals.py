"""``HomeSignals``: what one replica hears from the others (the wire payloads), and
that on SQLite a change stays in the process that made it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.engine.home_signals import HomeSignals, Watch
from storage import Database


def _signals(tmp_path: Path) -> tuple[HomeSignals, list[str], list[Watch]]:
    signals = HomeSignals(Database(f"sqlite:///{tmp_path / 'a.db'}"))
    changes: list[str] = []
    watches: list[Watch] = []
    signals.subscribe(lambda: changes.append("changed"), watches.append)
    return signals, changes, watches


async def test_on_sqlite_a_change_is_told_here_and_sent_nowhere(tmp_path: Path) -> None:
    signals, changes, _ = _signals(tmp_path)
    signals.changed()
    watch = signals.watching("slack", "U1")
    await signals.drain()
    assert changes == ["changed"] and signals.sent == 0
    assert watch.instance == signals.instance and watch.user == "U1"


def test_other_replicas_changes_and_opens_are_heard_not_our_own(tmp_path: Path) -> None:
    signals, changes, watches = _signals(tmp_path)
    signals.heard(json.dumps({"c": 1, "i": signals.instance}))  # our own echo
    signals.heard(json.dumps({"w": ["slack", "U1", 5.0], "i": signals.instance}))
    assert changes == [] and watches == []
    signals.heard(json.dumps({"c": 1, "i": "other"}))
    signals.heard(json.dumps({"w": ["slack", "U1", 5.0], "i": "other"}))
    assert changes == ["changed"] and watches == [Watch("slack", "U1", 5.0, "other")]
    for junk in ("{", "[]", json.dumps({"w": ["slack"], "i": "x"}), json.dumps({"c": 1})):
        signals.heard(junk)  # logged and ignored, never raised
    assert len(changes) == 1 and len(watches) == 1
    signals.heard("")  # the listener reconnected: everyone refreshes
    assert changes == ["changed", "changed"]


def test_exactly_one_of_two_opens_wins() -> None:
    first, second = Watch("slack", "U1", 10.0, "a"), Watch("slack", "U1", 11.0, "b")
    assert second.beats(first.at, first.instance) and not first.beats(second.at,
                                                                      second.instance)
    tie_a, tie_b = Watch("slack", "U1", 10.0, "a"), Watch("slack", "U1", 10.0, "b")
    assert tie_b.beats(tie_a.at, tie_a.instance) != tie_a.beats(tie_b.at, tie_b.instance)


@pytest.mark.postgres
async def test_a_burst_of_changes_shares_one_notification(postgres_url: str) -> None:
    """Every card posted or updated is a change: a burst of them (a few ms apart, as
    under load) goes out as one NOTIFY, and a change after it as the next one."""
    database = Database(postgres_url)
    try:
        signals = HomeSignals(database)
        for _ in range(20):
            signals.changed()
            await asyncio.sleep(0.002)
        await signals.drain()
        assert signals.sent == 1
        signals.changed()
        await signals.drain()
        assert signals.sent == 2
    finally:
        database.dispose()
