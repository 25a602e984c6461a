"""Standing grants as a Feishu Card JSON 2.0: the list ``grants`` sends, with a Revoke
button per grant.

Every untrusted part (agent, tool, scope, argument values) is in ``plain_text``
elements, which Feishu never parses, so ``<at id=all>`` or ``[x](javascript:…)`` in an
argument stays text. A Revoke button's callback value is ``{"g": grant id, "l":
locale}``: the grant (the engine checks who may revoke it) and the card's language for
the toast; it never collides with a request card's ``{"r": ref, …}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from renderers import i18n
from renderers.grants import GrantLine, grant_text, title
from renderers.markdown import check_feishu, plain
from renderers.words import said

Element = dict[str, Any]

MAX_SHOWN = 20
"""Grants per card (Feishu allows 200 components; each grant takes a few)."""
MAX_GRANT_ID = 10**18


def _text(content: str, limit: int) -> dict[str, Any]:
    return {"tag": "plain_text", "content": plain(content, limit) or "…"}


def grant_value(grant_id: int, locale: str | None) -> dict[str, Any]:
    """A Revoke button's callback value."""
    return {"g": grant_id, "l": i18n.normalize(locale)}


def parse_grant_value(value: object) -> tuple[int, str] | None:
    """``(grant id, card locale)`` of a Revoke button's callback value (object or JSON
    string), or None when it is not one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict) or "r" in value:
        return None
    grant_id = value.get("g")
    if isinstance(grant_id, bool) or not isinstance(grant_id, int) or not (
            0 < grant_id < MAX_GRANT_ID):
        return None
    locale = value.get("l")
    return grant_id, i18n.normalize(locale if isinstance(locale, str) else None)


def _grant_elements(grant: GrantLine, locale: str | None) -> list[Element]:
    parts = grant_text(grant, locale)
    lines = [said("grants.allows", label=parts.label, agent=parts.agent, tool=parts.tool,
                  scope=parts.scope).text(locale)]
    if parts.args:
        lines.append(said("grants.args", args=parts.args).text(locale))
    lines.append(" · ".join((said("grants.by", who=parts.granted_by).text(locale),
                             parts.uses, parts.until)))
    revoke = said("grants.revoke").text(locale)
    button: Element = {
        "tag": "button",
        "text": _text(revoke, 30),
        "type": "danger",
        "name": f"g_{grant.id}",
        "behaviors": [{"type": "callback", "value": grant_value(grant.id, locale)}],
        "confirm": {
            "title": _text(said("grants.revoke_title", label=parts.label).text(locale), 50),
            "text": _text(said("grants.revoke_confirm").text(locale), 300),
        },
    }
    return [{"tag": "hr"},
            {"tag": "div", "text": _text("\n".join(lines), 1500)},
            button]


def grants_card(grants: Sequence[GrantLine], locale: str | None,
                notice: str | None = None) -> dict[str, Any]:
    """The list card in ``locale``; ``notice`` (what a Revoke click did) goes on top."""
    heading = title(len(grants), locale)
    elements: list[Element] = []
    if notice:
        elements.append({"tag": "div", "text": _text(notice, 500)})
    for grant in grants[:MAX_SHOWN]:
        elements += _grant_elements(grant, locale)
    if len(grants) > MAX_SHOWN:
        elements.append({"tag": "div", "text": _text(
            said("grants.more", more=len(grants) - MAX_SHOWN).text(locale), 200)})
    if not elements:
        elements.append({"tag": "div", "text": _text(heading, 300)})
    card = {
        "schema": "2.0",
        "config": {"update_multi": True, "summary": {"content": plain(heading, 100)}},
        "header": {"title": _text(heading, 150), "template": "blue" if grants else "grey"},
        "body": {"elements": elements},
    }
    check_feishu(card)
    return card
