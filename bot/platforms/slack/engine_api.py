"""The slice of the engine that Slack listeners call, as a Protocol.

Listeners depend on this instead of the concrete ``Engine`` class so they can be
unit-tested with a stand-in and so the adapter stays apart from the core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import JsonValue

from bot.engine.batch import BatchResult, StoredBatch
from bot.engine.delegation_chat import Delegations
from bot.engine.inbox import Click, Recorded
from bot.engine.ports import Directory, Identity, Origin
from bot.engine.results import GrantView, PendingPage, RespondResult
from bot.engine.run_starts import Started
from bot.engine.start_rows import Start, StoredStart
from bot.settings import Settings
from renderers.card import RequestCard
from renderers.words import Said


class SlackEngine(Protocol):
    """What Slack needs from the engine (start runs, answer, look up requests)."""

    @property
    def delegations(self) -> Delegations:
        """``/askhuman delegate …`` (out of office)."""
        ...

    def directory(self, platform: str) -> Directory | None:
        """Membership and email lookups of ``platform``."""
        ...

    @property
    def settings(self) -> Settings:
        """The admin configuration now (a grant's route time zone)."""
        ...

    async def active_grants(self, who: Identity) -> list[GrantView]: ...

    async def revoke_grant(self, grant_id: int, who: Identity) -> RespondResult: ...

    async def start_run(
        self, agent: str, prompt: str, started_by: Identity, origin: Origin
    ) -> str: ...

    async def start_refusal(self, agent: str, who: Identity) -> Said | None: ...

    async def record_start(self, start: Start, budget: float = ...) -> StoredStart | None: ...

    async def run_start(self, stored: StoredStart, *, tell: bool = ...) -> Started: ...

    async def startable_agents(self, who: Identity) -> list[str]: ...

    async def respond(
        self, ref: str, responder: Identity, action_id: str, values: Mapping[str, Any]
    ) -> RespondResult: ...

    async def attach_files(
        self, ref: str, responder: Identity, field_name: str, files: Sequence[Mapping[str, Any]]
    ) -> RespondResult: ...

    async def answer_refusal(self, ref: str, who: Identity, event: str
                             ) -> RespondResult | None: ...

    async def record_click(self, click: Click, budget: float = ...) -> Recorded | None: ...

    async def decide_click(self, recorded: Recorded) -> RespondResult: ...

    async def record_batch(
        self, who: Identity, verb: str, refs: Sequence[str], reason: str | None = None,
        reply_to: Mapping[str, str] | None = None, budget: float = ...,
    ) -> StoredBatch: ...

    async def decide_batch(self, batch: StoredBatch) -> BatchResult: ...

    async def card(self, ref: str) -> RequestCard | None: ...

    async def pending_for(self, identity: Identity) -> list[RequestCard]: ...

    async def pending_page(
        self, identity: Identity, page: int = 1, per_page: int = 10
    ) -> PendingPage: ...

    async def first_seen(self, platform: str, key: str) -> bool: ...

    async def audit_refusal(
        self, ref: str | None, actor: Identity | None, reason: str,
        details: Mapping[str, JsonValue],
    ) -> None: ...
