"""A click Bolt takes is stored before Bolt starts its 3 s ack clock, so a slow store
is never answered 404.

Bolt waits ``ack_timeout`` (3 s) for a listener's ack, counted from when it starts the
listener, and then answers 404 "unhandled request". The click listeners stored the
click inside the listener, so a store that used its whole budget on a busy loop (four
workers on two shared cores) passed that clock: Slack got a 404 for a click that was
stored, or whose clicker was then told it was not (``tests/slack/test_workers.py``
failed so). Bolt's clock is moved here instead of the machine being loaded: it jumps
past the timeout while the click is being stored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from slack_bolt.listener import asyncio_runner

from tests.slack.conftest import ALICE, Slack
from tests.slack.test_batch import batch_payload

RETRIED = {"X-Slack-Retry-Num": "1"}
"""A retried delivery: always Bolt's, never the fast path's."""


class BoltClock:
    """``time`` for Bolt's listener runner, which ``jump`` moves past its ack timeout."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return time.time() + self.offset

    def jump(self) -> None:
        self.offset += 10.0


@pytest.fixture
def bolt_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[BoltClock]:
    clock = BoltClock()
    monkeypatch.setattr(asyncio_runner, "time", clock)
    yield clock


def _slow_store(slack: Slack, clock: BoltClock, name: str,
                monkeypatch: pytest.MonkeyPatch, pause: float = 0.0) -> list[str]:
    """Bolt's clock jumps past its ack timeout while ``engine.<name>`` runs (and the
    store then takes ``pause`` more seconds, longer than Bolt's 10 ms poll of the ack)."""
    stored: list[str] = []
    original = getattr(slack.engine, name)

    async def slow(*args: Any, **kwargs: Any) -> Any:
        clock.jump()
        await asyncio.sleep(pause)
        stored.append(name)
        return await original(*args, **kwargs)

    monkeypatch.setattr(slack.engine, name, slow)
    return stored


async def test_a_card_click_stored_after_bolts_ack_timeout_is_acked_not_404(
    slack: Slack, bolt_clock: BoltClock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (await slack.command("run deploy ship v2.0.0")).status_code == 200
    ts = await slack.wait_for_card()
    stored = _slow_store(slack, bolt_clock, "record_click", monkeypatch, pause=0.05)
    reply = await slack.interact(slack.click_payload(ts, "Approve", ALICE), **RETRIED)
    assert stored == ["record_click"], "the click did not go through Bolt's listener"
    assert (reply.status_code, reply.text) == (200, "")
    await slack.wait_until(lambda: slack.fake.calls_to("chat.update"), what="chat.update")
    assert slack.request_row().status == "submitted"


async def test_a_batch_stored_after_bolts_ack_timeout_is_acked_not_404(
    slack: Slack, bolt_clock: BoltClock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (await slack.command("run deploy ship v2.0.0")).status_code == 200
    await slack.wait_for_card()
    ref = slack.request_row().ref
    stored = _slow_store(slack, bolt_clock, "record_batch", monkeypatch, pause=0.05)
    payload = batch_payload(slack, ALICE, "approve", [ref])
    reply = await slack.interact(payload, **RETRIED)
    assert stored == ["record_batch"], "the batch did not go through Bolt's listener"
    assert (reply.status_code, reply.text) == (200, "")


async def test_a_run_stored_after_bolts_ack_timeout_is_acked_not_404(
    slack: Slack, bolt_clock: BoltClock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``/askhuman run`` stores its start before the ack (``admit``, with its own time
    budget); that store runs in the listener's middleware, before Bolt's clock."""
    from sqlalchemy import func, select

    from storage import Run, RunStart

    stored = _slow_store(slack, bolt_clock, "record_start", monkeypatch, pause=0.05)
    reply = await slack.command("run deploy ship v2.0.0")
    assert stored == ["record_start"]
    assert (reply.status_code, reply.text) == (200, "")
    await slack.wait_for_card()
    with slack.database.transaction() as session:
        assert session.scalar(select(func.count()).select_from(RunStart)) == 1
        assert session.scalar(select(func.count()).select_from(Run)) == 1


async def test_a_run_without_a_prompt_is_told_the_usage_and_stores_nothing(
    slack: Slack,
) -> None:
    from sqlalchemy import func, select

    from storage import RunStart

    reply = await slack.command("run deploy   ")
    assert reply.status_code == 200 and "Usage" in reply.json()["text"]
    with slack.database.transaction() as session:
        assert session.scalar(select(func.count()).select_from(RunStart)) == 0
