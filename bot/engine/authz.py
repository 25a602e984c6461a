"""Who may answer a request or start an agent: admin configuration plus platform membership.

Authorization runs before values are looked at, so a stranger learns nothing about
what a valid answer would be. Membership comes from the platform's ``Directory``.

Every check follows the same rules for answering and for starting:

- a person listed by id under ``users`` is allowed without any lookup;
- otherwise the directory is asked (email → id, groups, channel members); a lookup that
  fails (``DirectoryUnavailable``) can only refuse, with ``UNVERIFIED``, and only when no
  other lookup already allowed the person;
- on Slack, someone from another organisation (Slack Connect) counts as a group or
  channel member only when the route sets ``slack.allow_external: true``.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from bot.engine.ports import Directory, DirectoryUnavailable, Identity
from bot.settings import AgentSettings, Approvers, RouteSettings
from renderers.words import Said, said

NOT_ALLOWED = said("refused.not_allowed")
SELF_APPROVAL = said("refused.self_approval")
UNVERIFIED = said("refused.unverified")
EXTERNAL = said("refused.external")


class Verdict(Enum):
    MEMBER = "member"
    NOT_MEMBER = "not_member"
    UNVERIFIED = "unverified"
    EXTERNAL = "external"


async def is_external(identity: Identity, directory: Directory) -> bool:
    """True when the directory says ``identity`` is from another organisation (Slack
    Connect). Directories without ``is_external`` (Feishu, console) have no such notion."""
    check = getattr(directory, "is_external", None)
    return bool(await check(identity)) if check is not None else False


async def _in_any(identity: Identity, groups: list[str], channels: Iterable[str],
                  directory: Directory) -> Verdict:
    failed = False
    for lookup, keys in ((directory.group_members, groups), (directory.chat_members, channels)):
        for key in keys:
            try:
                if identity.user_id in await lookup(key):
                    return Verdict.MEMBER
            except DirectoryUnavailable:
                failed = True
    return Verdict.UNVERIFIED if failed else Verdict.NOT_MEMBER


async def verdict(identity: Identity, who: Approvers, channels: Iterable[str],
                  directory: Directory | None, *, allow_external: bool) -> Verdict:
    """Whether ``identity`` is one of ``who`` (``channels``: whose members count)."""
    if identity.user_id in who.users:
        return Verdict.MEMBER
    if directory is None:
        return Verdict.NOT_MEMBER
    failed = False
    if who.users:
        try:
            if identity.user_id in await directory.resolve_users(who.users):
                return Verdict.MEMBER
        except DirectoryUnavailable:
            failed = True
    channels = list(channels)
    if not who.groups and not channels:
        return Verdict.UNVERIFIED if failed else Verdict.NOT_MEMBER
    if not allow_external:
        try:
            if await is_external(identity, directory):
                return Verdict.UNVERIFIED if failed else Verdict.EXTERNAL
        except DirectoryUnavailable:
            return Verdict.UNVERIFIED
    found = await _in_any(identity, who.groups, channels, directory)
    return Verdict.UNVERIFIED if failed and found is Verdict.NOT_MEMBER else found


def allows_external(route: RouteSettings | None, platform: str) -> bool:
    """Whether people from another organisation count as members on ``platform``
    (a Slack Connect channel; the route's section says)."""
    section = route.section(platform) if route is not None else None
    return bool(section is not None and section.allow_external)


_REASONS = {Verdict.NOT_MEMBER: NOT_ALLOWED, Verdict.UNVERIFIED: UNVERIFIED,
            Verdict.EXTERNAL: EXTERNAL}


async def refusal(
    route: RouteSettings,
    identity: Identity,
    starter: Identity,
    delivered_channels: Iterable[str],
    directory: Directory | None,
) -> Said | None:
    """None when ``identity`` may answer; otherwise the reason shown to them."""
    approvers = route.approvers_for(identity.platform)
    if approvers is None:
        return NOT_ALLOWED
    if (identity.platform, identity.user_id) == (starter.platform, starter.user_id) and (
        not route.allow_self_approval
    ):
        return SELF_APPROVAL
    section = route.section(identity.platform)
    if section is not None and section.local and not approvers.anyone_listed:
        return None  # the local terminal: whoever runs the process may answer
    channels = list(delivered_channels) if approvers.channel_members else []
    found = await verdict(identity, approvers, channels, directory,
                          allow_external=allows_external(route, identity.platform))
    return None if found is Verdict.MEMBER else _REASONS[found]


def route_channel(route: RouteSettings | None, platform: str) -> str | None:
    """The channel (Slack) or chat (Feishu) ``route`` delivers to on ``platform``."""
    section = route.section(platform) if route is not None else None
    return section.chat if section is not None else None


def starters_key(name: str) -> str:
    return f"agents.{name}.starters"


async def start_refusal(
    name: str, agent: AgentSettings, route: RouteSettings | None, identity: Identity,
    directory: Directory | None,
) -> Said | None:
    """None when ``identity`` may start agent ``name``; otherwise the reason shown to them.

    ``starters.<platform>.channel_members`` counts the members of the channel the agent's
    route delivers to on that platform (its approvers' room).
    """
    section = agent.starters.for_platform(identity.platform) if agent.starters else None
    denied = said("start.refused", agent=name,
                  key=f"{starters_key(name)}.{identity.platform}")
    if section is None:
        return denied
    channel = route_channel(route, identity.platform) if section.channel_members else None
    found = await verdict(identity, section, [channel] if channel else [], directory,
                          allow_external=allows_external(route, identity.platform))
    if found is Verdict.MEMBER:
        return None
    return denied if found is Verdict.NOT_MEMBER else _REASONS[found]
