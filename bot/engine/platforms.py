"""The registered platforms and what each one can do, as the engine asks for it.

The engine never names a platform: it asks ``Platforms`` for the adapter of the
platform a request, a click or a run came from, and for that adapter's optional
capabilities (``bot.engine.ports``: ``Reminding``, ``ReadsClicks``, ``TellsClickers``,
``OpensThreads`` and the ``ClickTraits`` facts). A platform that behaves differently
declares it on its adapter; it never flips a switch that would change other platforms.
"""

from __future__ import annotations

from bot.engine.ports import (
    CachedLookups,
    Directory,
    DirectoryUnavailable,
    OpensThreads,
    PlatformAdapter,
    ReadsClicks,
    Reminding,
    TellsClickers,
)


class Platforms:
    """Adapters (and their directories) by platform name."""

    def __init__(self) -> None:
        self._adapters: dict[str, tuple[PlatformAdapter, Directory | None]] = {}

    def register(self, adapter: PlatformAdapter, directory: Directory | None = None) -> None:
        """Attach a platform; requests routed to it are delivered through ``adapter``."""
        self._adapters[adapter.platform] = (adapter, directory)

    def adapter(self, platform: str) -> PlatformAdapter | None:
        entry = self._adapters.get(platform)
        return entry[0] if entry else None

    def directory(self, platform: str) -> Directory | None:
        entry = self._adapters.get(platform)
        return entry[1] if entry else None

    def cached_directory(self, platform: str) -> Directory | None:
        """``platform``'s lookups answered from fresh cache only (a miss raises
        ``DirectoryUnavailable``): what a cheap pre-check may know without asking the
        platform. A directory without that capability answers nothing (``NoLookups``)."""
        directory = self.directory(platform)
        if directory is None:
            return None
        return directory.cached_only() if isinstance(directory, CachedLookups) else NO_LOOKUPS

    def reminder(self, platform: str) -> Reminding | None:
        adapter = self.adapter(platform)
        return adapter if isinstance(adapter, Reminding) else None

    def click_reader(self, platform: str) -> ReadsClicks | None:
        adapter = self.adapter(platform)
        return adapter if isinstance(adapter, ReadsClicks) else None

    def teller(self, platform: str) -> TellsClickers | None:
        adapter = self.adapter(platform)
        return adapter if isinstance(adapter, TellsClickers) else None

    def thread_opener(self, platform: str) -> OpensThreads | None:
        adapter = self.adapter(platform)
        return adapter if isinstance(adapter, OpensThreads) else None

    def clicks_name_their_message(self, platform: str) -> bool:
        return bool(getattr(self.adapter(platform), "clicks_name_their_message", False))

    def updates_cards_after_reply(self, platform: str) -> bool:
        return bool(getattr(self.adapter(platform), "updates_cards_after_reply", False))


class NoLookups:
    """A ``Directory`` that knows nothing without asking: every lookup raises."""

    async def resolve_users(self, users: list[str]) -> set[str]:
        raise DirectoryUnavailable("not cached")

    async def group_members(self, group_id: str) -> set[str]:
        raise DirectoryUnavailable("not cached")

    async def chat_members(self, chat_id: str) -> set[str]:
        raise DirectoryUnavailable("not cached")


NO_LOOKUPS = NoLookups()
