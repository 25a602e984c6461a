"""Admin configuration of an agent's tools (the ``tools:`` list under an agent).

Only admins write this file; the model never chooses a tool's import path, server,
``fixed`` values, approval rule or route. Secrets never go here: MCP servers get
environment variable *names* (``env``, ``headers_env``) whose values are read from
the process environment when the server starts.

Example::

    tools:
      - python: mypkg.ops:restart_service
        approval: always                 # never | always | {when: "<CEL over args>"}
        fixed: {cluster: prod-eu}        # hidden from the model, injected at call time
        editable: [replicas]             # approvers may change these before approving
      - mcp: {command: [python, -m, mypkg.mcp_server], env: [OPS_TOKEN]}
        include: [scale, status]
        approval: {when: "args.replicas > 3"}
      - mcp: {url: "http://127.0.0.1:9000/mcp", headers_env: {Authorization: OPS_MCP_AUTH}}
        prefix: sec                      # the model sees sec__scale, sec__status, …
        fixed: {scale: {cluster: prod-eu}}   # per tool, by the server's own tool name
        editable: {scale: [replicas]}        # per tool, like fixed
        approval: always
        route: security
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlparse

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from bot.tools.rules import Rule, compile_rule, validated

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_OUTPUT_CHARS = 4000
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")


def _seconds(value: object) -> float:
    """``30``, ``"30s"``, ``"2m"`` → seconds (> 0)."""
    hint = 'write a duration like "30s" or "2m", or a number of seconds'
    if isinstance(value, bool):
        raise ValueError(hint)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise ValueError(hint)
    if seconds <= 0:
        raise ValueError(f"must be positive; {hint}")
    return seconds


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WhenRule(_Strict):
    """Ask for approval only when the CEL expression is true for this call."""

    when: str

    @field_validator("when")
    @classmethod
    def _compiles(cls, v: str) -> str:
        return validated(v)

    def compiled(self) -> Rule:
        return compile_rule(self.when)


Approval = Literal["never", "always"] | WhenRule


def _one_of(model: type[BaseModel], value: object) -> BaseModel:
    """Validate ``value`` as ``model``, turning its first error into a plain ValueError
    (a union's error list would name every alternative instead of the one meant)."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown key; remove it or check its spelling"
        raise ValueError(f"{where}: {message}" if where else message) from None


class _ToolBase(_Strict):
    approval: Approval = "always"
    """Safe by default: a tool with no ``approval`` key asks every time."""

    @field_validator("approval", mode="before")
    @classmethod
    def _approval(cls, v: object) -> object:
        if v in ("never", "always") or isinstance(v, WhenRule):
            return v
        if isinstance(v, dict):
            return _one_of(WhenRule, v)
        raise ValueError('must be never, always or {when: "<CEL expression over args>"}')
    route: str | None = None
    """Send this tool's approval requests to another route (default: the agent's)."""
    timeout: float = DEFAULT_TIMEOUT
    """Longest one call may take; then the model gets a timeout error."""
    max_output_chars: int = Field(default=DEFAULT_MAX_OUTPUT_CHARS, ge=100, le=200_000)
    """Longer output is cut, with a visible marker, before the model sees it."""
    grant_scope: str | None = None
    """Which later calls a standing grant from this tool's approval covers: CEL over
    ``args`` (the new call) and ``call`` (the granted one), e.g.
    ``args.service == call.service``; default: the exact same arguments."""

    @field_validator("grant_scope")
    @classmethod
    def _scope(cls, v: str | None) -> str | None:
        return None if v is None else validated(v)

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: object) -> float:
        return _seconds(v)


class PythonToolSettings(_ToolBase):
    """A typed Python function (sync or async), imported from ``python: module:function``."""

    python: str
    fixed: dict[str, JsonValue] = Field(default_factory=dict)
    """Admin-set arguments: left out of the model's schema and injected at call time."""
    name: str | None = None
    """The name the model sees (default: the function's name)."""
    description: str | None = None
    """The description the model and approvers see (default: the docstring)."""

    editable: list[str] = Field(default_factory=list)
    """Arguments an approver may change before approving ("Edit and approve")."""

    @model_validator(mode="after")
    def _editable(self) -> PythonToolSettings:
        problem = _editable_problem(self.editable, self.fixed, "editable")
        if problem:
            raise ValueError(problem)
        return self

    @field_validator("python")
    @classmethod
    def _import_path(cls, v: str) -> str:
        if not IMPORT_PATH.fullmatch(v.strip()):
            raise ValueError("must be an import path like 'mypkg.ops:restart_service'")
        return v.strip()

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not ENV_NAME.fullmatch(v):
            raise ValueError("must be a tool identifier (letters, digits, underscores)")
        return v


class StdioServer(_Strict):
    """An MCP server started as a subprocess speaking MCP over stdin/stdout."""

    command: list[str] = Field(min_length=1)
    env: list[str] = Field(default_factory=list)
    """Names of environment variables passed to the server (values never in YAML)."""
    cwd: str | None = None

    @field_validator("command")
    @classmethod
    def _command(cls, v: list[str]) -> list[str]:
        if not v[0].strip():
            raise ValueError("the first item must be the program to run")
        return v

    @field_validator("env", mode="before")
    @classmethod
    def _env_names(cls, v: object) -> object:
        if isinstance(v, dict):
            raise ValueError("list variable names only (e.g. [OPS_TOKEN]); their values come "
                             "from the environment, never from this file")
        for name in v if isinstance(v, list) else []:
            if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return v


class HttpServer(_Strict):
    """An MCP server reached over Streamable HTTP."""

    url: str
    headers_env: dict[str, str] = Field(default_factory=dict)
    """Header name → environment variable holding its value (e.g. Authorization: OPS_AUTH)."""

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        parsed = urlparse(v)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError("must be an http:// or https:// URL")
        return v

    @field_validator("headers_env")
    @classmethod
    def _header_env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for header, name in v.items():
            if not ENV_NAME.fullmatch(name):
                raise ValueError(f"{header}: {name!r} is not an environment variable name; "
                                 "put the secret in the environment and name the variable here")
        return v


class McpToolSettings(_ToolBase):
    """The tools of one MCP server. Tools not listed in ``include`` always need approval."""

    mcp: StdioServer | HttpServer
    include: list[str] | None = None
    """Only these tools (and ``approval`` applies to them); default: every tool."""
    exclude: list[str] = Field(default_factory=list)
    prefix: str | None = None
    """The model sees this server's tools as ``<prefix>__<tool>`` (default: their own
    names). Set it when two servers, or a server and a Python tool, share a tool name.
    ``include``, ``exclude`` and ``fixed`` keep using the server's own names."""
    fixed: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)
    """Tool → admin-set arguments: left out of the model's schema and sent on every call."""
    editable: dict[str, list[str]] = Field(default_factory=dict)
    """Tool → arguments an approver may change before approving ("Edit and approve")."""

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str | None) -> str | None:
        if v is not None and not ENV_NAME.fullmatch(v):
            raise ValueError("must be an identifier (letters, digits, underscores), such as "
                             "the server's name")
        return v

    @field_validator("mcp", mode="before")
    @classmethod
    def _server(cls, v: object) -> object:
        if isinstance(v, StdioServer | HttpServer):
            return v
        if isinstance(v, dict) and "command" in v:
            return _one_of(StdioServer, v)
        if isinstance(v, dict) and "url" in v:
            return _one_of(HttpServer, v)
        raise ValueError("needs command: [program, args…] (stdio) or url: http://… "
                         "(Streamable HTTP)")

    @model_validator(mode="after")
    def _lists(self) -> McpToolSettings:
        if self.include is not None and self.exclude:
            raise ValueError("use include or exclude, not both")
        if self.include is None and self.approval != "always":
            raise ValueError(
                "approval other than 'always' needs an include list: tools of an MCP "
                "server that are not listed individually always need approval"
            )
        return self

    @model_validator(mode="after")
    def _fixed_tools(self) -> McpToolSettings:
        hidden = [tool for tool in self.fixed if not self.exposes(tool)]
        if hidden:
            raise ValueError(f"fixed: {', '.join(hidden)} is not exposed by include/exclude; "
                             "add it to include (or remove it from exclude), or drop it here")
        return self

    @model_validator(mode="after")
    def _editable_tools(self) -> McpToolSettings:
        hidden = [tool for tool in self.editable if not self.exposes(tool)]
        if hidden:
            raise ValueError(f"editable: {', '.join(hidden)} is not exposed by include/exclude; "
                             "add it to include (or remove it from exclude), or drop it here")
        for tool, names in self.editable.items():
            problem = _editable_problem(names, self.fixed.get(tool, {}), f"editable.{tool}")
            if problem:
                raise ValueError(problem)
        return self

    def visible_name(self, tool: str) -> str:
        """The name the model calls ``tool`` by (with the ``prefix``, if any)."""
        return f"{self.prefix}__{tool}" if self.prefix else tool

    def server_name(self, visible: str) -> str:
        """``visible_name`` reversed: the server's own name for a tool."""
        return visible.removeprefix(f"{self.prefix}__") if self.prefix else visible

    def approval_for(self, tool: str) -> Approval:
        """The entry's rule for listed tools; ``always`` for everything else."""
        return self.approval if self.include is not None and tool in self.include else "always"

    def exposes(self, tool: str) -> bool:
        if self.include is not None:
            return tool in self.include
        return tool not in self.exclude


def _editable_problem(names: list[str], fixed: dict[str, JsonValue], key: str) -> str | None:
    """An argument cannot be both set by the admin and changed by an approver."""
    both = [name for name in names if name in fixed]
    if both:
        return (f"{key}: {', '.join(both)} is also in fixed; an admin-fixed argument cannot "
                "be edited by approvers: remove it from one of the two")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        return f"{key}: {', '.join(twice)} is listed twice; list each argument once"
    return None


_PYTHON, _MCP = "function-python", "function-mcp"
"""Union tags. Error locations include the tag; ``bot.settings`` drops location parts
starting with ``function-`` (pydantic's own validator names), so a problem reads
``agents.ops.tools.0.fixed`` rather than ``agents.ops.tools.0.python.fixed``."""


def _kind(value: Any) -> str | None:
    if isinstance(value, dict):
        return _PYTHON if "python" in value else _MCP if "mcp" in value else None
    return _PYTHON if isinstance(value, PythonToolSettings) else (
        _MCP if isinstance(value, McpToolSettings) else None)


ToolSettings = Annotated[
    Annotated[PythonToolSettings, Tag(_PYTHON)] | Annotated[McpToolSettings, Tag(_MCP)],
    Discriminator(_kind, custom_error_type="tool_kind",
                  custom_error_message="each tool needs a 'python:' or an 'mcp:' key"),
]
"""One entry of an agent's ``tools:`` list."""
