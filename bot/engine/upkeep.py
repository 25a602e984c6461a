"""Housekeeping: platform event dedupe, adapter refusals, pruning and the audit seal.

Small writes that every replica shares through the database: ``first_seen`` is one
atomic INSERT into ``seen_events``, so a platform retry that reaches another replica
is recognized there too; pruning and the audit seal run from the worker loops.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Mapping, Sequence

from pydantic import JsonValue
from sqlalchemy.orm import Session

from bot.engine import audit_chain, housekeeping, inbox, instances, start_rows, store
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.ports import Identity


class Housekeeping:
    """Dedupe keys, refusal audits, retention and the hash chain of the audit log."""

    def __init__(self, ctx: EngineContext, committer: Committer) -> None:
        self._ctx = ctx
        self._committer = committer
        self.last_run: dt.datetime | None = None
        """When ``prune_old`` last ran in this process (``maybe_prune`` waits an interval)."""

    async def first_seen(self, platform: str, key: str) -> bool:
        """Record a platform event/callback id; True the first time, False for a repeat.

        One atomic INSERT into ``seen_events`` (shared by every replica), so a platform
        retry that reaches another process is recognized there as well. ``key`` names
        the kind and id, e.g. ``"event:Ev123"``, ``"nonce:abc"``, ``"message:om_1"``.
        Rows are pruned after ``seen_retention_seconds`` by the worker sweep. The insert
        is group-committed (the committer's ``batched``) with other dedupe keys and refusal audits.
        """
        now = self._ctx.now()
        return await self._committer.batched(
            lambda s: housekeeping.mark_seen(s, now, platform, key))

    async def first_seen_chain(self, platform: str, keys: Sequence[str]) -> list[bool]:
        """``first_seen`` for several keys in one group-committed step (one transaction).

        Keys are recorded in order and the chain stops at the first repeat: the verdict
        list has one entry per key tried, True for each new one and a final False if one
        was already known (later keys are then not recorded, exactly as if ``first_seen``
        had been called for each in turn and the caller stopped at the first repeat).
        So ``[True, True]`` means every key was new; anything shorter, or ending in
        False, names the first known key. Feishu records a callback's nonce and event id
        this way, in the shared transaction it would have used for either alone.
        """
        now = self._ctx.now()
        wanted = list(keys)

        def mark(session: Session) -> list[bool]:
            verdicts: list[bool] = []
            for key in wanted:
                verdicts.append(housekeeping.mark_seen(session, now, platform, key))
                if not verdicts[-1]:
                    break
            return verdicts

        return await self._committer.batched(mark)

    async def audit_refusal(
        self, ref: str | None, actor: Identity | None, reason: str,
        details: Mapping[str, JsonValue],
    ) -> None:
        """Audit a refusal an adapter decided (outcome ``refused``, event ``adapter_refused``).

        For *authenticated* requests only (signature-verified, or from an authenticated
        connection) that never reach the engine: a duplicate or stale callback, a click
        whose reference does not match its card... Unauthenticated junk is only logged
        by the adapters, so it cannot fill the database.
        """
        now = self._ctx.now()
        await self._committer.batched(lambda s: store.audit(
            s, now, "adapter_refused", outcome="refused", ref=ref[:64] if ref else None,
            actor=actor, reason=reason[:2000], details=dict(details)))

    async def seal_audit(self) -> int:
        """Chain the audit rows written since the last round (``audit_chain``)."""
        now = self._ctx.now()
        return await self._committer.tx(lambda session: audit_chain.seal(session, now))

    async def prune_old(self) -> dict[str, int]:
        """Delete ``seen_events`` past ``seen_retention_seconds``, and ``done`` outbox rows
        closed stored clicks and run starts past ``outbox_retention_seconds``, and apply the admin's
        ``retention:`` settings (answers, transcripts, audit rows); returns how many rows
        of each went."""
        now = self._ctx.now()
        self.last_run = now
        tuning = self._ctx.tuning
        pruned = await asyncio.to_thread(housekeeping.prune, self._ctx.db, now,
                                         tuning.seen_retention, tuning.outbox_retention)
        pruned |= await asyncio.to_thread(housekeeping.apply_retention, self._ctx.db, now,
                                          self._ctx.settings.retention)
        # closed clicks: kept as long as done outbox rows
        pruned["click_inbox"] = await self._committer.tx(
            lambda s: inbox.prune(s, now - tuning.outbox_retention))
        gone = await self._committer.tx(lambda s: instances.prune(s, now))
        if gone:
            pruned["instances"] = gone
        pruned["run_starts"] = await self._committer.tx(
            lambda s: start_rows.prune(s, now - tuning.outbox_retention))
        if any(pruned.values()):
            log.info("old rows pruned", extra=pruned)
        return pruned

    async def maybe_prune(self) -> None:
        """``prune_old`` at most once per ``housekeeping_interval_seconds`` (worker sweep)."""
        last = self.last_run
        if last is not None and self._ctx.now() - last < self._ctx.tuning.housekeeping_interval:
            return
        try:
            await self.prune_old()
        except Exception:
            log.exception("pruning old rows failed; retried at the next interval")
