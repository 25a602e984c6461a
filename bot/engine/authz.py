"""Who may answer a request: admin configuration plus platform membership.

Authorization runs before values are looked at, so a stranger learns nothing about
what a valid answer would be. Membership comes from the platform's ``Directory``.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.engine.ports import Directory, Identity
from bot.settings import RouteSettings

NOT_ALLOWED = "You are not allowed to answer this request."
SELF_APPROVAL = "You started this run, so you cannot approve it yourself."


async def _member(identity: Identity, approvers_users: list[str], groups: list[str],
                  channels: Iterable[str], directory: Directory | None) -> bool:
    if identity.user_id in approvers_users:
        return True
    if directory is None:
        return False
    if approvers_users and identity.user_id in await directory.resolve_users(approvers_users):
        return True
    for group in groups:
        if identity.user_id in await directory.group_members(group):
            return True
    for channel in channels:
        if identity.user_id in await directory.chat_members(channel):
            return True
    return False


async def refusal(
    route: RouteSettings,
    identity: Identity,
    starter: Identity,
    delivered_channels: Iterable[str],
    directory: Directory | None,
) -> str | None:
    """None when ``identity`` may answer; otherwise the reason shown to them."""
    approvers = route.approvers_for(identity.platform)
    if approvers is None:
        return NOT_ALLOWED
    if (identity.platform, identity.user_id) == (starter.platform, starter.user_id) and (
        not route.allow_self_approval
    ):
        return SELF_APPROVAL
    if identity.platform == "console" and not approvers.anyone_listed:
        return None  # the local terminal: whoever runs the process may answer
    channels = list(delivered_channels) if approvers.channel_members else []
    if await _member(identity, approvers.users, approvers.groups, channels, directory):
        return None
    return NOT_ALLOWED
