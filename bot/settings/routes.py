"""Routes: where a request goes, who may answer it and how long it waits
(``routes:`` in the file), with the platform sections, escalation and sign-off groups."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from bot.settings.base import KeyPathError, _Strict
from bot.settings.durations import (
    Percent,
    Span,
    describe_span,
    format_duration,
    parse_duration,
    parse_span,
    span_seconds,
)

LOCAL_PLATFORM = "console"
"""The local terminal's platform: where runs with no chat to answer in post their result."""


class Approvers(_Strict):
    """Who may answer on one platform. All lists are OR-ed together."""

    users: list[str] = Field(default_factory=list)
    """Platform user ids (Slack U…, Feishu open_id or email, console user names)."""
    groups: list[str] = Field(default_factory=list)
    """Slack user groups (S…); Feishu has none."""
    channel_members: bool = False
    """Members of the channel/chat the card was delivered to may answer."""

    @property
    def anyone_listed(self) -> bool:
        return bool(self.users or self.groups or self.channel_members)


class SlackRoute(_Strict):
    local: ClassVar[bool] = False
    """Whether the platform is the local terminal (see ``ConsoleRoute``)."""

    channel: str | None = None
    users: list[str] = Field(default_factory=list)
    """Users who get the card as a DM."""
    approvers: Approvers = Field(default_factory=Approvers)
    allow_external: bool = False
    """Slack Connect: people from another organisation in a shared channel count as
    channel members (or group members) only when this is true. People listed by id
    under ``users`` are always allowed. Also applies to starting this route's agents."""

    @model_validator(mode="after")
    def _has_recipient(self) -> SlackRoute:
        if not self.channel and not self.users:
            raise ValueError("set a channel and/or users to deliver to")
        return self

    def recipients(self) -> tuple[list[str], list[str]]:
        """(channels, users) the card is posted to."""
        return ([self.channel] if self.channel else []), list(self.users)

    @property
    def chat(self) -> str | None:
        """The channel notices and results go to."""
        return self.channel

    @property
    def origin(self) -> str | None:
        """Where a run started from this route posts its answer: the channel, else the
        first user's DM."""
        return self.channel or (self.users[0] if self.users else None)


class FeishuRoute(_Strict):
    local: ClassVar[bool] = False
    allow_external: ClassVar[bool] = False
    """Feishu has no shared channels across organisations."""

    chat_id: str | None = None
    users: list[str] = Field(default_factory=list)
    """open_ids (ou_…) or emails that get the card as a direct message."""
    approvers: Approvers = Field(default_factory=Approvers)

    @model_validator(mode="after")
    def _has_recipient(self) -> FeishuRoute:
        if not self.chat_id and not self.users:
            raise ValueError("set a chat_id and/or users to deliver to")
        return self

    def recipients(self) -> tuple[list[str], list[str]]:
        """(chats, users) the card is posted to."""
        return ([self.chat_id] if self.chat_id else []), list(self.users)

    @property
    def chat(self) -> str | None:
        """The chat notices and results go to."""
        return self.chat_id

    @property
    def origin(self) -> str | None:
        """Where a run started from this route posts its answer: the chat (or nowhere)."""
        return self.chat_id or None


class ConsoleRoute(_Strict):
    local: ClassVar[bool] = True
    """The local terminal: whoever runs the process may answer unless approvers are
    listed."""
    allow_external: ClassVar[bool] = False
    chat: ClassVar[str | None] = None
    origin: ClassVar[str | None] = None

    enabled: bool = True
    approvers: Approvers = Field(default_factory=Approvers)
    """Empty means: anyone at the local terminal may answer."""

    def recipients(self) -> tuple[list[str], list[str]]:
        """The terminal is the one channel."""
        return ["console"], []


class EscalationSettings(_Strict):
    """One step of an escalation chain: still pending ``after`` its creation (a duration
    or a percentage of the timeout), also deliver the request to ``route``."""

    after: Span = Field(description="seconds after the request was created, or a Percent")
    route: str
    """Another route: its recipients get the same card, its approvers may answer too."""

    @field_validator("after", mode="before")
    @classmethod
    def _after(cls, v: object) -> Span:
        return parse_span(v)


class OnTimeout(_Strict):
    """What else happens when a request times out (it is never approved)."""

    notify: str | None = None
    """A route whose channel (Slack ``channel`` / Feishu ``chat_id``) gets a notice, once."""


class GrantSettings(_Strict):
    """``grants: {max_duration: 8h, max_uses: 50}``: approvers of this route may approve
    a tool call "and allow similar" calls for at most ``max_duration`` and ``max_uses``
    (``bot.engine.grants``). Off unless set."""

    max_duration: float = Field(description="seconds")
    max_uses: int

    @field_validator("max_duration", mode="before")
    @classmethod
    def _duration(cls, v: object) -> float:
        return parse_duration(v)

    @field_validator("max_uses", mode="before")
    @classmethod
    def _uses(cls, v: object) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError("must be a whole number of uses, at least 1 (e.g. max_uses: 50)")
        return v


class SignOff(_Strict):
    """One group under a route's ``require``: someone from it must approve.

    ``{group: S0123456789}`` is a Slack user group; ``{users: [...]}`` lists Slack
    ``U…`` ids, Feishu open_ids or emails, console names, or names under ``people``.
    ``name`` is what the card shows (default: the group id, or "group N").
    """

    name: str | None = None
    group: str | None = None
    users: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_shape(self) -> SignOff:
        if bool(self.group) == bool(self.users):
            raise ValueError(
                "a sign-off group is either {group: S0123456789} (a Slack user group) or "
                "{users: [U0123456789, alice@example.com, ou_…]} (people on any platform), "
                "optionally with a name; set exactly one of group or users")
        if self.group is not None and not re.fullmatch(r"S[A-Za-z0-9_]+", self.group):
            raise KeyPathError("group", f"{self.group!r} is not a Slack user group id "
                               "(S0123456789); for Feishu or plain lists write users: [...]")
        return self


_ACTION_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_action_ids(v: list[str]) -> list[str]:
    """``require_reason`` entries are plain action ids (``ValueError`` says the fix)."""
    for entry in v:
        if not _ACTION_ID.match(entry):
            raise ValueError(
                f"{entry!r} is not an action id; list the ids of the actions that need "
                "a reason, exactly as agents send them, e.g. require_reason: [reject] "
                "(no patterns or wildcards)")
    return v


class RouteSettings(_Strict):
    """Where a request goes, who may answer, and how long it waits."""

    timeout: float = Field(default=86400.0, description="seconds")
    quorum: int = Field(default=1, ge=1)
    locale: Literal["en", "zh-CN"] = "en"
    """Language of the card chrome askhuman writes (model-written text is never
    translated)."""
    timezone: str | None = None
    """IANA time zone for dates on cards (``Asia/Shanghai``); None: UTC."""
    allow_self_approval: bool = False
    reminder: Span | None = Field(default=None, description="seconds between reminders")
    """Remind the recipients (in the card's thread) every ``reminder`` while pending
    (a duration, or a percentage of the timeout like ``25%``)."""
    max_reminders: int = Field(default=3, ge=1)
    escalation: list[EscalationSettings] | None = None
    """An escalation chain: each step also delivers to another route's recipients and
    approvers when still pending ``after`` the request was created (once per step; the
    deadline stays ``timeout``). A single mapping is a one-step chain."""
    on_timeout: OnTimeout | None = None
    """``{notify: <route>}``: post a notice to that route's channel when a request times
    out (a timeout never approves)."""
    slack: SlackRoute | None = None
    feishu: FeishuRoute | None = None
    console: ConsoleRoute | None = None
    veto: bool = True
    """With a quorum, a choice of any ``destructive`` action decides at once."""
    require: list[SignOff] = Field(default_factory=list)
    """Sign-off per group: one approver from each group must approve (a person in two
    groups counts for one of them)."""
    require_reason: list[str] = Field(default_factory=list)
    """Action ids (e.g. ``reject``) that need a reason; the card gets a Reason field."""
    grants: GrantSettings | None = None
    """Standing grants: tool-approval cards offer "Approve and allow similar…" within
    these limits (None: no grants on this route)."""

    @field_validator("require_reason")
    @classmethod
    def _action_ids(cls, v: list[str]) -> list[str]:
        return check_action_ids(v)

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: object) -> float:
        return parse_duration(v)

    @field_validator("reminder", mode="before")
    @classmethod
    def _reminder(cls, v: object) -> Span | None:
        return None if v is None else parse_span(v)

    @field_validator("escalation", mode="before")
    @classmethod
    def _chain(cls, v: object) -> object:
        return [v] if isinstance(v, dict) else v  # the one-step form of old configs

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r}; write an IANA name like "
                             "Asia/Shanghai or Europe/Berlin") from None
        return v

    @model_validator(mode="after")
    def _somewhere_to_go(self) -> RouteSettings:
        if not (self.slack or self.feishu or (self.console and self.console.enabled)):
            raise ValueError("a route needs at least one of: slack, feishu, console")
        for name in ("slack", "feishu"):
            section = getattr(self, name)
            if section is not None and not section.approvers.anyone_listed:
                raise ValueError(
                    f"{name}.approvers lists nobody; add users, groups or "
                    "channel_members: true"
                )
        self.check_timing()
        self._check_policy()
        return self

    def check_timing(self) -> None:
        """Reminders and escalation steps fall within the timeout (``KeyPathError``)."""
        timeout = format_duration(self.timeout)
        if (self.reminder is not None and not isinstance(self.reminder, Percent)
                and self.reminder >= self.timeout):
            raise KeyPathError(
                "reminder",
                f"must be shorter than timeout ({format_duration(self.reminder)} is not "
                f"shorter than {timeout}); lower reminder or raise timeout",
            )
        self._check_chain(timeout)

    def _check_chain(self, timeout: str) -> None:
        """Each step comes before the timeout and after the step before it."""
        previous = 0.0
        for index, step in enumerate(self.escalation or []):
            key = "escalation.after" if len(self.escalation or []) == 1 else \
                f"escalation.{index}.after"
            at = span_seconds(step.after, self.timeout)
            if at >= self.timeout:
                raise KeyPathError(key, f"must be shorter than timeout "
                                   f"({describe_span(step.after)} is not shorter than "
                                   f"{timeout}); lower {key} or raise timeout")
            if at <= previous:
                raise KeyPathError(key, f"must come after the step before it "
                                   f"({describe_span(step.after)} is not later); list the "
                                   "steps in the order they happen")
            previous = at

    def _check_policy(self) -> None:
        """Rules that can never be met: a quorum larger than the people the route lists
        (when it lists only users), a Slack group on a route without Slack."""
        listed = {name: getattr(self, name).approvers for name in self.platforms()}
        open_ended = any(a.groups or a.channel_members for a in listed.values()) or (
            "console" in listed and not listed["console"].anyone_listed)
        if self.quorum > 1 and not open_ended:
            people = {(name, u) for name, a in listed.items() for u in a.users}
            people |= {("require", u) for r in self.require for u in r.users}
            if self.quorum > len(people):
                raise KeyPathError("quorum", f"needs {self.quorum} distinct approvers but the "
                                   f"route lists only {len(people)}; lower quorum or add "
                                   "approvers (users, groups or channel_members: true)")
        for index, signoff in enumerate(self.require):
            if signoff.group is not None and self.slack is None:
                raise KeyPathError(f"require.{index}.group", "Slack user groups need a slack "
                                   "section on this route; list users instead")

    def platforms(self) -> list[str]:
        """Platforms this route delivers to, in a stable order."""
        out = [name for name in ("slack", "feishu") if getattr(self, name) is not None]
        if self.console is not None and self.console.enabled:
            out.append("console")
        return out

    def section(self, platform: str) -> SlackRoute | FeishuRoute | ConsoleRoute | None:
        """This route's settings for ``platform`` (None: it does not deliver there)."""
        if platform not in self.platforms():
            return None
        found: SlackRoute | FeishuRoute | ConsoleRoute | None = getattr(self, platform)
        return found

    def approvers_for(self, platform: str) -> Approvers | None:
        section = self.section(platform)
        return section.approvers if section is not None else None

    def recipients(self, platform: str) -> tuple[list[str], list[str]]:
        """(channels, users) that get this route's cards on ``platform``."""
        section = self.section(platform)
        return section.recipients() if section is not None else ([], [])
