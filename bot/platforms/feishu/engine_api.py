"""The slice of the engine that the Feishu handlers call, as a Protocol.

The handlers depend on this instead of the concrete ``Engine`` class, so they stay
apart from the core and can be driven by a stand-in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import JsonValue

from bot.engine.batch import BatchResult, StoredBatch
from bot.engine.click_check import Checked
from bot.engine.delegation_chat import Delegations
from bot.engine.inbox import Click, Recorded
from bot.engine.ports import Directory, Identity, Origin, PlatformAdapter
from bot.engine.results import GrantView, PendingPage, RespondResult
from bot.engine.run_starts import Started
from bot.engine.start_rows import Start, StoredStart
from bot.settings import Settings
from renderers.card import RequestCard
from renderers.words import Said


class EngineApi(Protocol):
    """The slice of ``bot.engine.Engine`` the Feishu handlers use."""

    @property
    def delegations(self) -> Delegations:
        """``delegate …`` messages (out of office)."""
        ...

    def directory(self, platform: str) -> Directory | None: ...

    @property
    def settings(self) -> Settings:
        """The admin configuration now (a grant's route time zone)."""
        ...

    async def active_grants(self, who: Identity) -> list[GrantView]: ...

    async def revoke_grant(self, grant_id: int, who: Identity) -> RespondResult: ...

    def register_adapter(self, adapter: PlatformAdapter,
                         directory: Directory | None = None) -> None: ...

    async def start_run(
        self, agent: str, prompt: str, started_by: Identity, origin: Origin
    ) -> str: ...

    async def startable_agents(self, who: Identity) -> list[str]: ...

    async def start_refusal(self, agent: str, who: Identity) -> Said | None: ...

    async def record_start(self, start: Start, budget: float = ...) -> StoredStart | None: ...

    async def run_start(self, stored: StoredStart, *, tell: bool = ...) -> Started: ...

    async def pending_page(
        self, identity: Identity, page: int = 1, per_page: int = 10
    ) -> PendingPage: ...

    async def respond(
        self, ref: str, responder: Identity, action_id: str, values: Mapping[str, Any]
    ) -> RespondResult: ...

    async def record_click(self, click: Click, budget: float = ...,
                           seen: Sequence[str] = ...) -> Recorded | None: ...

    async def decide_click(self, recorded: Recorded, *, tell_later: bool = False
                           ) -> RespondResult: ...

    async def check_click(self, click: Click, seen: Sequence[str] = ...) -> Checked: ...

    async def told_clicker(self, recorded: Recorded) -> None: ...

    async def tell_failed(self, recorded: Recorded, exc: BaseException) -> None: ...

    async def abandon_click(self, recorded: Recorded) -> None: ...

    async def record_batch(
        self, who: Identity, verb: str, refs: Sequence[str], reason: str | None = None,
        reply_to: Mapping[str, str] | None = None, budget: float = ...,
    ) -> StoredBatch: ...

    async def decide_batch(self, batch: StoredBatch) -> BatchResult: ...

    async def card(self, ref: str) -> RequestCard | None: ...

    async def find_by_message(self, platform: str, message_id: str) -> str | None: ...

    async def attach_files(
        self, ref: str, responder: Identity, field_name: str, files: Any
    ) -> RespondResult: ...

    async def first_seen(self, platform: str, key: str) -> bool: ...

    async def first_seen_chain(self, platform: str, keys: Sequence[str]) -> list[bool]: ...

    async def card_for_message(
        self, platform: str, message_id: str
    ) -> tuple[str, RequestCard | None] | None: ...

    async def audit_refusal(
        self, ref: str | None, actor: Identity | None, reason: str,
        details: Mapping[str, JsonValue],
    ) -> None: ...
