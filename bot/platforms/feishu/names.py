"""People's names for Feishu open_ids, so nobody reads ``ou_3f9…`` in a toast.

Feishu callbacks identify people by open_id only, and the engine's messages name a
decider by id when it has no display name ("Already decided by ou_… (Approve)").
Toasts and text replies are plain text (no ``<at>`` mentions), so the handlers swap
each open_id for the person's name from the contact API (``FeishuApi.user_name``),
cached per process, or for a neutral "another approver" when the name is unknown,
the lookup fails or it would not fit the reply's time budget.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable

from bot.platforms.feishu.client import FeishuApiError
from renderers.words import Said

log = logging.getLogger("askhuman.feishu.names")

OPEN_ID_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_])ou_[A-Za-z0-9]{1,64}(?![A-Za-z0-9_])")
NEUTRAL = "another approver"
MAX_NAME_CHARS = 64

Lookup = Callable[[str], Awaitable[str | None]]


class NameCache:
    """open_id → name via ``lookup`` (the contact API), with a bounded TTL cache.

    Names are kept ``ttl`` seconds; a failed or empty lookup is remembered for
    ``miss_ttl`` seconds so a missing permission does not cost an API call per
    click. Concurrent lookups of one id share a single call.
    """

    def __init__(
        self,
        lookup: Lookup,
        *,
        ttl: float = 3600.0,
        miss_ttl: float = 300.0,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self._ttl = ttl
        self._miss_ttl = miss_ttl
        self._max = max_entries
        self._clock = clock
        self._cache: OrderedDict[str, tuple[float, str | None]] = OrderedDict()
        self._inflight: dict[str, asyncio.Task[str | None]] = {}

    async def name(self, open_id: str, timeout: float | None = None) -> str | None:
        """The person's name, or None (unknown, failed, or slower than ``timeout``;
        a slow lookup still finishes in the background and fills the cache)."""
        cached = self._cache.get(open_id)
        if cached is not None and cached[0] > self._clock():
            return cached[1]
        task = self._inflight.get(open_id)
        if task is None:
            task = self._inflight[open_id] = asyncio.create_task(self._fetch(open_id))
            task.add_done_callback(lambda _t: self._inflight.pop(open_id, None))
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            return None

    async def _fetch(self, open_id: str) -> str | None:
        try:
            found = await self._lookup(open_id)
        except FeishuApiError as exc:
            log.info("feishu name lookup failed",
                     extra={"open_id": open_id, "code": exc.code, "status": exc.status})
            found = None
        except Exception:
            log.exception("feishu name lookup crashed", extra={"open_id": open_id})
            found = None
        name = " ".join(found.split())[:MAX_NAME_CHARS] if found else None
        self._remember(open_id, name or None)
        return name or None

    def _remember(self, open_id: str, name: str | None) -> None:
        ttl = self._ttl if name else self._miss_ttl
        self._cache[open_id] = (self._clock() + ttl, name)
        self._cache.move_to_end(open_id)
        while len(self._cache) > self._max:
            self._cache.popitem(last=False)

    async def humanize(self, text: str, timeout: float = 0.5) -> str:
        """``text`` with every open_id replaced by that person's name (or "another
        approver"); all lookups together take at most ``timeout`` seconds."""
        found = await self._names_in([text], timeout)
        return _swap(text, found) if found else text

    async def humanize_words(self, words: Said, timeout: float = 0.5) -> Said:
        """``words`` with every open_id in their parameters replaced by a name, as
        ``humanize`` does (one lookup for all of them)."""
        found = await self._names_in(words.texts(), timeout)
        return words.map_text(lambda text: _swap(text, found)) if found else words

    async def _names_in(self, texts: Iterable[str], timeout: float) -> dict[str, str]:
        ids = list(dict.fromkeys(i for text in texts for i in OPEN_ID_IN_TEXT.findall(text)))
        if not ids:
            return {}
        names = await asyncio.gather(*(self.name(i, timeout) for i in ids))
        return {i: n or NEUTRAL for i, n in zip(ids, names, strict=True)}


def _swap(text: str, found: dict[str, str]) -> str:
    return OPEN_ID_IN_TEXT.sub(lambda m: found.get(m.group(), NEUTRAL), text)


def neutral_words(words: Said) -> Said:
    """``words`` with every open_id replaced by "another approver" (no lookup)."""
    return words.map_text(lambda text: OPEN_ID_IN_TEXT.sub(NEUTRAL, text))
