"""``/askhuman delegate @bob until 2026-12-24`` (and ``revoke``, ``list``) on Slack.

The person is named by a mention (``<@U…|bob>``, what Slack sends for a picked user
when the command escapes mentions), a member id (``U0123…``) or an email (looked up
in the workspace). A plain ``@bob`` cannot be resolved without escaping, so the reply
says how to name them instead.
"""

from __future__ import annotations

import re

from bot.engine import delegation_chat
from bot.engine.ports import Directory, DirectoryUnavailable, Identity
from bot.platforms.slack.engine_api import SlackEngine
from renderers.words import Said, said

PLATFORM = "slack"
_MENTION = re.compile(r"^<@([UW][A-Z0-9]{2,30})(?:\|([^>]{0,80}))?>$")
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,30}$")


async def resolve(token: str | None, directory: Directory | None) -> Identity | None:
    """The Slack person ``token`` names (None: unknown)."""
    if not token:
        return None
    if match := _MENTION.match(token):
        return Identity(PLATFORM, match.group(1), match.group(2) or None)
    if _USER_ID.match(token):
        return Identity(PLATFORM, token)
    if "@" in token[1:] and directory is not None:
        try:
            found = await directory.resolve_users([token])
        except DirectoryUnavailable:
            return None
        ids = [user for user in found if _USER_ID.match(user)]
        return Identity(PLATFORM, ids[0], token) if ids else None
    return None


async def delegate_command(engine: SlackEngine, user: Identity, rest: str,
                           directory: Directory | None) -> Said:
    """The ephemeral reply to ``/askhuman delegate …`` (shown in the person's locale)."""
    command = delegation_chat.parse_chat(rest)
    target = await resolve(command.target, directory)
    if command.target and target is None and command.verb in ("add", "revoke"):
        return said("delegation.who_unknown_slack", who=command.target[:60])
    return await engine.delegations.run_chat(user, command, target)
