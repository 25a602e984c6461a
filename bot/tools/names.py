"""One tool name, one tool: two entries of an agent's ``tools:`` never share a name.

Two MCP servers (or an MCP server and a Python tool, or the ask_human tool) may offer
the same tool name. Silently letting one shadow the other would run the wrong tool,
so a shared name is refused with a message that names both entries, the tool and
the fix: ``prefix: <name>`` on an MCP entry (its tools become ``<name>__<tool>``),
or ``name:`` on a Python tool.

Names are known at different times: Python tools and MCP ``include`` lists when the
config loads (``book_static``); an MCP server's full list only once it is reached
(``askhuman config check`` tries, and every run checks again in ``CheckedToolset``
before the model sees a tool).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.toolsets import CombinedToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from bot.tools.config import McpToolSettings, PythonToolSettings, ToolSettings
from bot.tools.mcp_fixed import FixedArgumentError


class ToolNameCollision(UserError):
    """Two tools of one agent would have the same name; the message says how to fix it."""


@dataclass(frozen=True)
class Owner:
    """Where a tool name comes from: ``key`` is the config path (``agents.ops.tools.1``)."""

    key: str
    what: str
    """"MCP server python -m ops", "Python tool mypkg.ops:scale" or "the ask_human tool"."""
    mcp: bool = False
    prefix: str | None = None


def owner_of(key: str, entry: ToolSettings) -> Owner:
    if isinstance(entry, PythonToolSettings):
        return Owner(key, f"Python tool {entry.python}")
    from bot.tools.mcp import server_label

    return Owner(key, f"MCP server {server_label(entry.mcp)}", mcp=True, prefix=entry.prefix)


def collision(name: str, first: Owner, second: Owner) -> str:
    """The refusal: both entries, the tool, and what to set."""
    both = f"{second.key} ({second.what}) and {first.key} ({first.what})"
    unprefixed = [o for o in (first, second) if o.mcp and not o.prefix]
    if len(unprefixed) == 2:
        fix = ("set `prefix: <name>` on one of them (its tools are then called "
               f"<name>__{name})")
    elif unprefixed:
        other = first if unprefixed[0] is second else second
        alt = " or `name:` on the Python tool" if other.what.startswith("Python") else ""
        fix = (f"set `prefix: <name>` on the MCP server at {unprefixed[0].key}{alt} "
               f"(its tools are then called <name>__{name})")
    elif first.mcp or second.mcp:
        fix = "give the MCP servers different prefixes"
    else:
        fix = "set `name:` on one of them"
    return f"{both} both give the model a tool called {name!r}; {fix}"


@dataclass
class NameBook:
    """Names claimed so far, and the problems found while claiming."""

    owners: dict[str, Owner] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def claim(self, names: Iterable[str], owner: Owner) -> None:
        for name in names:
            first = self.owners.setdefault(name, owner)
            if first is not owner and first.key != owner.key:
                self.problems.append(collision(name, first, owner))


def static_names(entry: McpToolSettings) -> list[str]:
    """The names an MCP entry is known to give before its server is reached."""
    return [entry.visible_name(tool) for tool in entry.include or []]


@dataclass
class CheckedToolset(CombinedToolset[Any]):
    """The agent's configured toolsets, combined; a shared name stops the run with
    ``ToolNameCollision`` (pydantic-ai's own conflict error names no config key)."""

    owners: Sequence[Owner] = ()
    """One per toolset, in the same order."""
    reserved: dict[str, Owner] = field(default_factory=dict)
    """Names taken outside these toolsets (the ask_human tool)."""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        try:
            tools = await super().get_tools(ctx)
        except (ToolNameCollision, FixedArgumentError):
            raise
        except UserError as exc:
            problem = await self._collision(ctx)
            if problem is None:
                raise
            raise ToolNameCollision(problem) from exc
        for name in tools.keys() & self.reserved.keys():
            owner = next(o for o, t in zip(self.owners, await self._lists(ctx), strict=True)
                         if name in t)
            raise ToolNameCollision(collision(name, self.reserved[name], owner))
        return tools

    async def _lists(self, ctx: RunContext[Any]) -> list[dict[str, ToolsetTool[Any]]]:
        return [await toolset.get_tools(ctx) for toolset in self.toolsets]

    async def _collision(self, ctx: RunContext[Any]) -> str | None:
        book = NameBook(dict(self.reserved))
        for owner, tools in zip(self.owners, await self._lists(ctx), strict=True):
            book.claim(tools, owner)
        return book.problems[0] if book.problems else None
