"""Who did something, as a signed Slack payload says, including their organisation.

The team matters for Slack Connect: in a shared channel, people from another
organisation are channel members too, and must not count as approvers or starters
unless the route allows external people. Only ids the payload attributes to the person
are kept; where it says nothing (slash commands), ``SlackDirectory.is_external`` asks
``users.info``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.engine.ports import Identity

PLATFORM = "slack"


def _text(value: Any) -> str | None:
    return str(value) if value else None


def from_interaction(body: Mapping[str, Any]) -> Identity:
    """The clicker / modal submitter (``block_actions``, ``view_submission``)."""
    user = body.get("user") or {}
    team = _text(user.get("team_id"))
    context = body.get("team") or {}
    enterprise = None
    if team is not None and team == context.get("id"):
        # The payload's team is the person's own, so its enterprise is theirs too.
        enterprise = _text((body.get("enterprise") or {}).get("id")
                           or context.get("enterprise_id"))
    name = user.get("name") or user.get("username")
    return Identity(PLATFORM, str(user.get("id") or ""), display_name=name or None,
                    team=team, enterprise=enterprise)


def from_command(command: Mapping[str, Any]) -> Identity:
    """The person who ran the slash command (their team comes from ``users.info``)."""
    return Identity(PLATFORM, str(command["user_id"]),
                    display_name=command.get("user_name") or None)


def from_event(event: Mapping[str, Any], name: str | None = None) -> Identity:
    """The author of a message event (``user_team`` is set in shared channels)."""
    return Identity(PLATFORM, str(event.get("user") or ""), display_name=name,
                    team=_text(event.get("user_team")))
