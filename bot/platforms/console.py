"""The console platform: requests and results printed to a terminal (``askhuman demo``).

Cards are rendered with ``renderers.text``; answers are read by the caller (the demo
command) and handed to ``Engine.respond`` like any other platform would. It needs no
tokens and no network.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from typing import TextIO

from bot.engine.ports import DeliveryRef, DeliveryTarget, Identity, Origin, PostKey
from renderers.card import RequestCard
from renderers.markdown import message_text

PLATFORM = "console"


def render(card: RequestCard) -> str:
    """The text rendering (a minimal fallback if the text renderer is unavailable)."""
    try:
        from renderers.text import render_text
    except ImportError:  # pragma: no cover - only while renderers/text.py is missing
        actions = ", ".join(f"{a.id} ({a.label})" for a in card.args.actions)
        return f"{card.args.title or ''}\n{card.args.question}\nActions: {actions}"
    return render_text(card)


@dataclass
class ConsoleAdapter:
    """Prints cards and results; keeps the delivered cards for the caller to answer."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    platform: str = PLATFORM
    delivered: list[RequestCard] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def deliver(
        self, card: RequestCard, target: DeliveryTarget, key: PostKey | None = None
    ) -> DeliveryRef:
        self.delivered.append(card)
        print(render(card), file=self.out, flush=True)
        return DeliveryRef(PLATFORM, target.id, f"console-{next(self._ids)}")

    async def update(self, card: RequestCard, ref: DeliveryRef) -> None:
        if card.status != "pending":
            print(f"[{ref.message_id}] {render(card)}", file=self.out, flush=True)

    async def remind(
        self, card: RequestCard, ref: DeliveryRef, text: str, key: PostKey | None = None
    ) -> None:
        print(f"[{ref.message_id}] {message_text(text)}", file=self.out, flush=True)

    async def post_run_result(
        self, origin: Origin, text: str, key: PostKey | None = None
    ) -> None:
        """The agent's output is model-written: no terminal escapes reach the terminal."""
        self.results.append(text)
        print(message_text(text), file=self.out, flush=True)


class ConsoleDirectory:
    """No groups or chats on a terminal: only listed user names match."""

    async def resolve_users(self, users: list[str]) -> set[str]:
        return set(users)

    async def group_members(self, group_id: str) -> set[str]:
        return set()

    async def chat_members(self, chat_id: str) -> set[str]:
        return set()


def console_identity(name: str) -> Identity:
    return Identity(PLATFORM, name, name)
