"""Standing grants as Block Kit: the ``/askhuman grants`` list and App Home's section.

Each grant is one section whose accessory is a Revoke button (``ahg:{grant id}``,
asking once more in a native dialog). Agent, tool, scope and argument values are
untrusted: escaped (``slack_escape``) and shown ``verbatim``, so ``<!channel>`` or
``<javascript:…|x>`` in an argument stays text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from renderers.grants import GrantLine, grant_text, title
from renderers.markdown import check_slack, slack_escape, truncate
from renderers.slack.kit import Block, mrkdwn, plain_text
from renderers.words import said

REVOKE_PREFIX = "ahg:"
REVOKE_ACTION_ID_PATTERN = re.compile(r"^ahg:")
MAX_SHOWN = 20
"""Grants per list (Slack allows 50 blocks in a message; each grant takes one)."""
_ID = re.compile(r"[0-9]{1,18}", re.ASCII)


def revoke_action_id(grant_id: int) -> str:
    return f"{REVOKE_PREFIX}{grant_id}"


def parse_revoke_action_id(action_id: object) -> int | None:
    """The grant id of a Revoke button's ``action_id``, or None if it is not ours."""
    if not isinstance(action_id, str) or not action_id.startswith(REVOKE_PREFIX):
        return None
    rest = action_id[len(REVOKE_PREFIX):]
    return int(rest) if _ID.fullmatch(rest) else None


def grant_block(grant: GrantLine, locale: str | None) -> Block:
    """One grant: what it allows, who granted it, uses left, until when; Revoke."""
    parts = grant_text(grant, locale)
    what = said("grants.allows", label=f"*{slack_escape(parts.label)}*",
                agent=f"`{slack_escape(parts.agent)}`", tool=f"`{slack_escape(parts.tool)}`",
                scope=slack_escape(parts.scope)).text(locale)
    lines = [what]
    if parts.args:
        lines.append(said("grants.args", args=f"`{slack_escape(parts.args)}`").text(locale))
    lines.append(" · ".join((
        said("grants.by", who=slack_escape(parts.granted_by)).text(locale),
        slack_escape(parts.uses), slack_escape(parts.until))))
    revoke = said("grants.revoke").text(locale)
    return {
        "type": "section",
        "block_id": f"grant:{grant.id}",
        "text": mrkdwn(truncate("\n".join(lines), 3000)),
        "accessory": {
            "type": "button",
            "action_id": revoke_action_id(grant.id),
            "value": revoke_action_id(grant.id),
            "style": "danger",
            "text": plain_text(revoke, 75),
            "confirm": {
                "title": plain_text(said("grants.revoke_title", label=parts.label)
                                    .text(locale), 100),
                "text": plain_text(said("grants.revoke_confirm").text(locale), 300),
                "confirm": plain_text(revoke, 30),
                "deny": plain_text(said("grants.keep").text(locale), 30),
                "style": "danger",
            },
        },
    }


def grant_blocks(grants: Sequence[GrantLine], locale: str | None,
                 most: int = MAX_SHOWN) -> list[Block]:
    """The heading and one section per grant (at most ``most``; a note says how many
    more there are)."""
    blocks: list[Block] = [{"type": "section", "text": mrkdwn(
        "*" + slack_escape(title(len(grants), locale)) + "*")}]
    blocks += [grant_block(grant, locale) for grant in grants[:most]]
    if len(grants) > most:
        blocks.append({"type": "context", "elements": [mrkdwn(
            said("grants.more", more=len(grants) - most).text(locale))]})
    return blocks


def grants_message(grants: Sequence[GrantLine], locale: str | None,
                   notice: str | None = None) -> dict[str, Any]:
    """The ephemeral ``/askhuman grants`` message; ``notice`` (already safe mrkdwn: what
    a Revoke click did) goes on top."""
    blocks = grant_blocks(grants, locale)
    if notice:
        blocks.insert(0, {"type": "section", "text": mrkdwn(truncate(notice, 3000))})
    text = slack_escape(title(len(grants), locale))
    message = {"text": f"{notice}\n{text}" if notice else text, "blocks": blocks}
    check_slack(message)
    return message
