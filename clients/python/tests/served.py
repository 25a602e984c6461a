"""A served askhuman as an integration test sees it: its API, and Alice's hands in Slack."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from askhuman_client import AsyncClient, Client

AGENTS = "C0AGENTS"
QUICK = "C0QUICK"


@dataclass(frozen=True)
class Card:
    """A card as Alice sees it in Slack."""

    ts: str
    channel: str
    text: str
    buttons: list[str]
    fields: list[str]
    blocks: list[dict[str, Any]]


@dataclass
class Served:
    """A running askhuman (its API) and Alice's hands in Slack (its control app)."""

    url: str
    api_key: str
    control: str
    seen: set[tuple[str, str]] = field(default_factory=set)

    def client(self) -> Client:
        return Client(self.url, self.api_key)

    def async_client(self) -> AsyncClient:
        return AsyncClient(self.url, self.api_key)

    async def _get(self, path: str, **params: str) -> Any:
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.get(self.control + path, params=params)
            response.raise_for_status()
            return response.json()

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(self.control + path, json=body)
            response.raise_for_status()
            data: dict[str, Any] = response.json()
            return data

    async def cards(self, channel: str = AGENTS) -> list[Card]:
        return [Card(**c) for c in await self._get("/cards", channel=channel)]

    async def next_card(self, channel: str = AGENTS, timeout: float = 15) -> Card:
        """The oldest card in ``channel`` not returned before (waits for one)."""
        deadline = time.monotonic() + timeout
        while True:
            for card in await self.cards(channel):
                if (card.channel, card.ts) not in self.seen:
                    self.seen.add((card.channel, card.ts))
                    return card
            if time.monotonic() > deadline:
                raise AssertionError(f"no new card in {channel} within {timeout}s")
            await asyncio.sleep(0.05)

    async def click(self, card: Card, label: str, *, reason: str | None = None,
                    values: dict[str, Any] | None = None) -> dict[str, Any]:
        """Alice clicks ``label``; ``values`` fill the card's inputs by field name or
        label (a select by the option label she sees); ``reason`` fills "Reason"."""
        answer = await self._post("/click", {"ts": card.ts, "channel": card.channel,
                                             "label": label, "reason": reason,
                                             "values": values or {}})
        assert answer["status"] == 200, answer
        return answer

    async def edit(self, card: Card, values: dict[str, Any]) -> dict[str, Any]:
        """Alice clicks "Edit and approve" and submits the modal with ``values``."""
        answer = await self._post("/edit", {"ts": card.ts, "channel": card.channel,
                                            "values": values})
        assert answer["status"] == 200, answer
        return answer

    async def thread(self, card: Card) -> dict[str, Any]:
        return await self._get("/thread", channel=card.channel, ts=card.ts)
