"""Standing grants as a person sees them in a list: what each allows, who granted it,
how many uses are left and until when (``/askhuman grants``, Feishu ``grants``, App
Home).

``GrantLine`` is the renderers' own view of a grant (renderers never import the
engine); the platforms build it from the engine's ``GrantView`` and the route's time
zone. Agent names, tool names and argument values are model- or agent-written: this
module only shortens them to raw text, and each platform renderer escapes it its own
way (``renderers.slack.grants``, ``renderers.feishu_grants``). The chrome is in the
sentence catalogues (``grants.*`` keys), rendered in the reader's locale.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from renderers import i18n
from renderers.markdown import truncate
from renderers.words import said

ARG_CHARS = 60
"""Longest argument value shown before it is cut (the list is a reminder, not the call)."""
ARGS_CHARS = 300
"""Longest argument summary of one grant."""
SCOPE_CHARS = 200
NAME_CHARS = 100


@dataclass(frozen=True)
class GrantLine:
    """One active grant, ready to show (the engine's ``GrantView`` plus its route's
    time zone)."""

    id: int
    label: str
    """``G-7``: what people and the audit call it."""
    route: str
    agent: str
    tool: str
    scope: str | None
    """The admin's CEL text; None: the exact same arguments."""
    args: Mapping[str, Any]
    granted_by: str
    expires_at: dt.datetime
    max_uses: int
    uses: int
    timezone: str | None = None
    """The route's ``timezone`` for the expiry (None: UTC)."""

    @property
    def uses_left(self) -> int:
        return max(self.max_uses - self.uses, 0)


@dataclass(frozen=True)
class GrantText:
    """A grant's parts as raw text in the current locale (each platform escapes them)."""

    label: str
    agent: str
    tool: str
    scope: str
    """"exact same arguments" or "arguments matching <CEL>"."""
    args: str
    """``name=value, …`` shortened; empty when the grant was made for no arguments."""
    granted_by: str
    uses: str
    until: str


def grant_text(grant: GrantLine, locale: str | None) -> GrantText:
    """``grant`` as raw text in ``locale``; the expiry in the route's time zone."""
    with i18n.speaking(locale, grant.timezone):
        until = i18n.format_when(grant.expires_at)
    scope = (said("grants.scope_exact") if grant.scope is None
             else said("grants.scope_cel", cel=truncate(grant.scope, SCOPE_CHARS)))
    return GrantText(
        label=truncate(grant.label, 20),
        agent=truncate(grant.agent, NAME_CHARS),
        tool=truncate(grant.tool, NAME_CHARS),
        scope=scope.text(locale),
        args=args_summary(grant.args),
        granted_by=truncate(grant.granted_by or "?", NAME_CHARS),
        uses=said("grants.uses_left", left=grant.uses_left, most=grant.max_uses).text(locale),
        until=said("grants.until", when=until).text(locale),
    )


def args_summary(args: Mapping[str, Any]) -> str:
    """``service=web, replicas=3``: every value on one line, long ones cut."""
    parts = []
    for name, value in args.items():
        text = value if isinstance(value, str) else json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), default=str)
        parts.append(f"{truncate(str(name), 40)}={truncate(' '.join(text.split()), ARG_CHARS)}")
    return truncate(", ".join(parts), ARGS_CHARS)


def title(count: int, locale: str | None) -> str:
    """The list's heading: how many grants the reader may revoke, or that there are none."""
    if not count:
        return said("grants.none").text(locale)
    return said("grants.title", count=count).text(locale)
