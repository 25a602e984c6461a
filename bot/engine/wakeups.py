"""Wake-ups between the engine's loops, and the background tasks a shutdown waits for.

A decision queues a resume job; rather than letting the resume loop find it at its
next poll, the decision ``resume_due`` pokes it (and a resume round already waiting on
its running jobs). Expiry pokes the outbox loop the same way. Other replicas' decisions
arrive through ``waiters`` (PostgreSQL ``LISTEN/NOTIFY``), which pokes too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class Wakeups:
    """Events that wake ``serve_forever``'s resume and outbox loops early."""

    def __init__(self) -> None:
        self.resume = asyncio.Event()
        self.outbox = asyncio.Event()
        self.clicks = asyncio.Event()
        self.starts = asyncio.Event()
        self.pokes = 0
        """How many times a resume was announced: a resume round that found the queue
        empty claims again only when this moved on."""
        self.nudges: set[asyncio.Event] = set()
        """Resume rounds waiting on their running jobs."""

    def fresh_events(self) -> None:
        """New events for the running loop (``serve_forever`` may run on a new loop)."""
        self.resume = asyncio.Event()
        self.outbox = asyncio.Event()
        self.clicks = asyncio.Event()
        self.starts = asyncio.Event()

    def resume_due(self) -> None:
        """A decision has a resume waiting."""
        self.pokes += 1
        for nudge in self.nudges:
            nudge.set()
        self.resume.set()

    def outbox_due(self) -> None:
        """Side effects were queued for the outbox loop (expiry)."""
        self.outbox.set()

    def reclaim(self) -> None:
        """A holder died (``bot.engine.instances``): its clicks, side effects and resume
        jobs are free, so every loop that takes rows over should look now."""
        self.clicks.set()
        self.starts.set()
        self.outbox_due()
        self.resume_due()


class Background:
    """Tasks that outlive the call that started them; ``drain`` waits for them."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def start(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self.keep(task)
        return task

    def keep(self, task: asyncio.Future[Any]) -> None:
        """Hold a reference until ``task`` is done (the loop only keeps weak ones)."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, timeout: float) -> None:
        pending = set(self._tasks)
        if pending:
            await asyncio.wait(pending, timeout=timeout)
