"""The renderers' input: one request as a person should see it, at one moment.

The engine builds a ``RequestCard`` from its stored request; renderers turn it into
platform JSON. Keeping this a plain dataclass means renderers stay pure and never
import the engine or storage.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from bot.askhuman.schema import AskHumanField, AskHumanToolArgs, SelectOption

CardStatus = Literal["pending", "submitted", "timeout", "cancelled", "unavailable"]


@dataclass(frozen=True)
class ToolArg:
    """One argument of a tool call, as the approval card lists it."""

    name: str
    value: JsonValue
    """Validated value (untrusted, model-written unless ``fixed``)."""
    fixed: bool = False
    """Set by the admin's ``fixed`` config, not by the model."""
    size: int | None = None
    """Characters of the full value when ``value`` holds only the start of it."""


@dataclass(frozen=True)
class GrantOffer:
    """The limits a standing grant made from this card may have (the route's
    ``grants``): the card offers presets up to them."""

    max_seconds: float
    max_uses: int


@dataclass(frozen=True)
class ToolEdit:
    """An approver's edit of a tool call: the edited arguments before and after."""

    before: Mapping[str, JsonValue]
    after: Mapping[str, JsonValue]
    by: str
    """The editor's display name (platform-vouched, shown as untrusted text)."""


@dataclass(frozen=True)
class ToolApprovalView:
    """The tool call a tool-approval card asks about (``RequestCard.tool``).

    Built by the engine from the stored request; ``renderers.tool_card`` turns it into
    the card's buttons and reason field (``tool_approval_args``) and its readable
    argument list (``arg_lines``). Tool names and descriptions come from admin config
    or an MCP server, arguments from the model: all of it is rendered as plain text.
    """

    tool: str
    description: str
    args: tuple[ToolArg, ...]
    binding: str
    """Full hash of the tool name and canonical JSON arguments; cards show 12 chars."""
    grant: GrantOffer | None = None
    """The route allows standing grants: the card offers "Approve and allow similar…"."""
    grant_scope: str | None = None
    """The tool's ``grant_scope`` (CEL) a grant made here would match with."""
    editable: tuple[str, ...] = ()
    """Arguments an approver may change ("Edit and approve"); admin config."""
    schema: Mapping[str, JsonValue] = field(default_factory=dict)
    """JSON Schema of the ``editable`` arguments (the tool's own, cut to them)."""
    edit: ToolEdit | None = None
    """The last edit, once an approver changed the call (``args`` show the edited call)."""

    @property
    def short_binding(self) -> str:
        return self.binding[:12]


@dataclass(frozen=True)
class RequestCard:
    """Everything a renderer needs; model-written text lives only inside ``args``."""

    ref: str
    """Opaque, unguessable request reference carried in buttons and callbacks."""
    args: AskHumanToolArgs
    """Normalized (validated) ask_human arguments. Untrusted text."""
    agent_name: str
    deadline: dt.datetime | None = None
    version: int = 1
    """Message version; Slack block_ids change with it so stale input is dropped."""
    status: CardStatus = "pending"
    decided_by_id: str | None = None
    """Platform user id of the person who decided (trusted, from the platform)."""
    decided_by_name: str | None = None
    decided_by_platform: str | None = None
    """Where the decider acted ("slack", "feishu", "console", "api"); renderers mention
    the decider only on that platform (None: unknown, the id's shape decides)."""
    decided_at: dt.datetime | None = None
    action_id: str | None = None
    action_label: str | None = None
    values: Mapping[str, JsonValue] = field(default_factory=dict)
    message: str | None = None
    """System text for timeout / cancel / unavailable (trusted, but still escaped)."""
    votes: int = 0
    quorum: int = 1
    tool: ToolApprovalView | None = None
    """Set for a tool-approval request: the call to approve (``args`` then holds the
    engine-made Approve/Reject actions and the optional reason field)."""
    locale: str = "en"
    """The route's ``locale`` for the card's chrome (``renderers.i18n``)."""
    timezone: str | None = None
    """The route's ``timezone`` for dates on the card (None: UTC)."""
    responses: tuple[tuple[str, str], ...] = ()
    """(who, chosen action's label) of each response so far, oldest first (names come
    from the platforms; still escaped). Shown as "1 of 2 approvals: Alice (Approve)"."""
    signoffs: tuple[tuple[str, bool], ...] = ()
    """(group name from admin config, signed off) of the route's ``require`` groups."""
    escalated_to: tuple[str, ...] = ()
    """Escalation routes reached so far (admin config names), in order."""
    reminded_at: dt.datetime | None = None
    """When the last reminder was sent (None: never)."""
    decided_via_id: str | None = None
    """A delegate decided for the person named in ``decided_by_*`` (out of office); the
    decider line then shows ``decided_by_name`` ("Bob for Alice") instead of a mention."""


# ---------------------------------------------------------------- shared helpers
# Compatible additions: small pure helpers every renderer needs the same way.


WITHDRAW_TOKEN = "-withdraw"
"""What a card's "Withdraw" menu item carries instead of an action id. Not an identifier,
so no model-written action can ever be mistaken for it."""
MAX_REF_CHARS = 64
"""Longest request reference a callback may carry (ours are 16; storage holds 64)."""
_INDEX = re.compile(r"[0-9]{1,6}", re.ASCII)


def index_token(token: object, prefix: str) -> int | None:
    """``prefix`` + a small decimal index → the index; None for anything else.

    Tokens come back from platform payloads: ``"o" + 5,000 digits`` or a superscript
    digit must give None, never an exception (``int()`` raises on both).
    """
    if not isinstance(token, str) or not token.startswith(prefix):
        return None
    digits = token[len(prefix):]
    return int(digits) if _INDEX.fullmatch(digits) else None


def option_token(index: int) -> str:
    """The platform-side value of option ``index``.

    Option values are model-written and may be long (Slack caps them at 150) or
    contain anything; sending the position instead keeps payloads small and makes
    the mapping deterministic from the args alone, so ``read_values`` can map it
    back for any version of the card.
    """
    return f"o{index}"


def option_value(options: Sequence[SelectOption], token: object) -> str | None:
    """Map a platform option value back to the contract's option value.

    A token the card never offered (a forged or stale payload) comes back as the raw
    string, so the engine refuses it with a clear reason and an audit row instead of
    the answer silently losing the field. Only a non-string gives None.
    """
    if not isinstance(token, str):
        return None
    index = index_token(token, "o")
    if index is not None and index < len(options):
        return options[index].value
    return token


def find_field(args: AskHumanToolArgs, name: str) -> AskHumanField | None:
    """The field called ``name``, if the request has it."""
    return next((f for f in args.fields if f.name == name), None)


def progress_text(card: RequestCard, t: Callable[..., str]) -> str | None:
    """"1 of 2 approvals: Alice (Approve)" and "Sign-off: SEC ✓, OPS …" in the catalog's
    words (``t``: ``renderers.i18n.t``), raw text for each renderer to escape; None
    when the card has neither."""
    parts = []
    if card.responses:
        who = ", ".join(t("choice", who=name, choice=label) for name, label in card.responses)
        parts.append(t("progress", votes=card.votes, quorum=card.quorum, who=who))
    if card.signoffs:
        groups = ", ".join(t("signed" if done else "unsigned", group=name)
                           for name, done in card.signoffs)
        parts.append(t("signoffs", groups=groups))
    return " · ".join(parts) or None


def args_of(card_or_args: RequestCard | AskHumanToolArgs) -> AskHumanToolArgs:
    """Accept either input so platform adapters can read values with what they hold."""
    return card_or_args.args if isinstance(card_or_args, RequestCard) else card_or_args


@dataclass(frozen=True)
class RunLine:
    """One run a person started, as their Slack App Home lists it (``renderers.home``).

    ``agent`` is admin config; ``prompt`` is what the person typed (untrusted text,
    shown escaped); ``waiting_on`` is the title or question of its open request, if any
    (model-written, shown escaped)."""

    id: str
    agent: str
    status: str
    """``running``, ``waiting``, ``succeeded`` or ``failed``."""
    prompt: str
    started_at: dt.datetime
    waiting_on: str | None = None
