"""``delegate …`` chat commands (Slack ``/askhuman delegate``, the Feishu ``delegate``
message): parsed here, carried out through the engine's transactions."""

from __future__ import annotations

from dataclasses import dataclass

from bot.engine import delegation
from bot.engine.cards import as_utc
from bot.engine.committer import Committer
from bot.engine.context import EngineContext
from bot.engine.ports import Identity
from renderers.words import Said, joined, said

CHAT_USAGE = said("delegation.usage")

@dataclass(frozen=True)
class ChatCommand:
    """A parsed ``delegate …`` command: ``verb`` is add | revoke | list | usage."""

    verb: str
    target: str | None = None
    """Who, as the person typed it (a mention token, an id or an email)."""
    until: str | None = None

def parse_chat(rest: str) -> ChatCommand:
    """``@bob until 2026-12-24`` / ``revoke [@bob]`` / ``list`` / ``""`` (the words after
    ``delegate``). The adapter turns ``target`` into a platform identity."""
    words = rest.split()
    if not words or words[0].lower() == "list":
        return ChatCommand("list")
    if words[0].lower() == "revoke":
        return ChatCommand("revoke", " ".join(words[1:2]) or None)
    if len(words) == 3 and words[1].lower() == "until":
        return ChatCommand("add", words[0], words[2])
    if len(words) == 2:
        return ChatCommand("add", words[0], words[1])
    return ChatCommand("usage")


class Delegations:
    """Out of office from a chat: add, revoke and list a person's delegations."""

    def __init__(self, ctx: EngineContext, committer: Committer) -> None:
        self._ctx = ctx
        self._committer = committer

    async def delegate(self, frm: Identity, to: Identity, until_text: str) -> Said:
        """``/askhuman delegate @bob until 2026-12-24``: the words to show the delegator."""
        now = self._ctx.now()
        try:
            until = delegation.parse_until(until_text, now)
            by = f"{frm.platform}:{frm.user_id}"
            view = await self._committer.tx(
                lambda s: delegation.add(s, now, frm, to, until, by))
        except delegation.DelegationError as exc:
            return said("delegation.not_delegated", reason=exc.words)
        until_utc = as_utc(view.until)
        name = delegation.name_of(to.user_id, to.display_name)
        return said("delegation.added", until=f"{until_utc:%Y-%m-%d %H:%M UTC}", name=name)

    async def revoke(self, frm: Identity, to_user: str | None) -> Said:
        now = self._ctx.now()
        by = f"{frm.platform}:{frm.user_id}"
        ended = await self._committer.tx(
            lambda s: delegation.revoke(s, now, frm, to_user, by))
        if not ended:
            return said("delegation.none_to_revoke")
        return said("delegation.revoked", count=ended)

    async def mine(self, who: Identity) -> Said:
        """The person's active delegations, both ways, as chat text."""
        now = self._ctx.now()
        views = await self._committer.read(
            lambda s: delegation.listing(s, now, who.platform, who.user_id))
        if not views:
            return said("delegation.none")
        lines = []
        for view in views:
            until = f"{as_utc(view.until):%Y-%m-%d %H:%M UTC}"
            if view.from_user == who.user_id:
                lines.append(said("delegation.to", until=until,
                                  name=delegation.name_of(view.to_user, view.to_name)))
            else:
                lines.append(said("delegation.from", until=until,
                                  name=delegation.name_of(view.from_user, view.from_name)))
        return joined(lines, "list.lines")

    async def run_chat(self, who: Identity, command: ChatCommand,
                       target: Identity | None) -> Said:
        """Carry out a parsed command for ``who`` (``target``: the resolved person)."""
        if command.verb == "list":
            return await self.mine(who)
        if command.verb == "revoke":
            if command.target is not None and target is None:
                return said("delegation.who_unknown", who=command.target[:60], usage=CHAT_USAGE)
            return await self.revoke(who, target.user_id if target else None)
        if command.verb == "add" and command.until is not None:
            if target is None:
                return said("delegation.who_unknown", who=(command.target or "")[:60],
                            usage=CHAT_USAGE)
            return await self.delegate(who, target, command.until)
        return CHAT_USAGE
