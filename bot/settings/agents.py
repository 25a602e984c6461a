"""Agents (``agents:``): model, instructions, guardrails, route, tools and who may start
them; plus the checks between an agent and its route and the warnings ``config check``
prints."""

from __future__ import annotations

from pydantic import Field, model_validator

from bot.askhuman.config import AskHumanConfig
from bot.settings.base import KeyPathError, _Strict
from bot.settings.routes import Approvers, RouteSettings
from bot.tools.config import ToolSettings


class Starters(_Strict):
    """Who may start an agent from each chat platform (same shape as approvers).

    ``channel_members: true`` means the members of the channel (Slack ``channel``) or
    chat (Feishu ``chat_id``) the agent's route delivers its cards to. A platform
    without a section here cannot start the agent at all.
    """

    slack: Approvers | None = None
    feishu: Approvers | None = None
    console: Approvers | None = None
    """Console user names (``askhuman demo`` starts runs as ``demo-requester``)."""

    @model_validator(mode="after")
    def _each_lists_someone(self) -> Starters:
        for name in ("slack", "feishu", "console"):
            section = getattr(self, name)
            if section is not None and not section.anyone_listed:
                raise KeyPathError(name, "lists nobody; add users, groups or "
                                         "channel_members: true, or remove the section")
        if self.console is not None and (self.console.groups or self.console.channel_members):
            raise KeyPathError("console", "the console has no groups or channels; "
                                          "list console user names under users")
        if self.feishu is not None and self.feishu.groups:
            raise KeyPathError("feishu.groups", "Feishu has no user groups askhuman can use; "
                                                "list users or set channel_members: true")
        return self

    def for_platform(self, platform: str) -> Approvers | None:
        return getattr(self, platform, None) if platform in ("slack", "feishu", "console") \
            else None


class AgentSettings(_Strict):
    """One agent: its model, instructions, guardrails, route and who may start it."""

    model: str
    instructions: str = ""
    route: str = "default"
    ask_human: AskHumanConfig = Field(default_factory=AskHumanConfig)
    starters: Starters | None = None
    """Who may start this agent from Slack, Feishu or the console. Missing means
    nobody can (only trusted callers such as the API or schedules start it);
    ``askhuman config check`` warns about it."""
    tools: list[ToolSettings] = Field(default_factory=list)
    """Python and MCP tools the agent may call (see ``bot.tools.config``)."""


def check_starter_channels(name: str, agent: AgentSettings, route: RouteSettings) -> None:
    """``starters.<platform>.channel_members`` needs a channel on the agent's route."""
    if agent.starters is None:
        return
    for platform, field in (("slack", "channel"), ("feishu", "chat_id")):
        section = agent.starters.for_platform(platform)
        if section is None or not section.channel_members:
            continue
        delivery = getattr(route, platform)
        if delivery is None or not getattr(delivery, field):
            raise KeyPathError(
                f"agents.{name}.starters.{platform}.channel_members",
                f"route '{agent.route}' has no {platform}.{field} whose members could start "
                f"'{name}'; set routes.{agent.route}.{platform}.{field} or list users instead",
            )


def config_warnings(agents: dict[str, AgentSettings]) -> list[str]:
    """Valid but probably unintended settings, each naming the key and the fix."""
    return [
        f"agents.{name}.starters is missing, so nobody can start '{name}' from Slack, "
        f"Feishu or the console (only the API or schedules can). Add who may start it, "
        f"e.g. starters: {{slack: {{users: [U0123456789]}}}}"
        for name, agent in sorted(agents.items())
        if agent.starters is None
    ]
