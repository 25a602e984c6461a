"""The HTTP API and MCP server (``api:``): webhook hosts, guardrails, per-client limits."""

from __future__ import annotations

from pydantic import Field, field_validator

from bot.askhuman.config import AskHumanConfig
from bot.settings.base import _Strict


class ApiClientLimits(_Strict):
    """Per-client overrides under ``api.clients.<name>`` (the client itself is created
    with ``askhuman api-key create``; its key never appears in this file)."""

    ask_human: AskHumanConfig | None = None
    """Guardrails for this client's requests (default: ``api.ask_human``)."""


class ApiSettings(_Strict):
    """The HTTP API and MCP server (``/api/v1``, ``/mcp``, ``askhuman mcp``)."""

    callback_hosts: list[str] = Field(default_factory=list)
    """Hosts webhooks may go to: names (``hooks.example.com``), ``host:port`` or CIDR
    ranges (``10.1.0.0/16``). Private, loopback, link-local and metadata addresses are
    refused unless an entry lists the address or a range containing it."""
    ask_human: AskHumanConfig = Field(default_factory=AskHumanConfig)
    """Guardrails for API/MCP requests, as for an agent (Dify's defaults)."""
    clients: dict[str, ApiClientLimits] = Field(default_factory=dict)
    rate_limit: int = Field(default=120, ge=1)
    """Default requests per minute per client, across all replicas (``--rate-limit``
    overrides)."""
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    mcp_progress_seconds: float = Field(default=15.0, gt=0)
    """How often an MCP ``ask_human`` call reports progress while it waits."""
    local_answers: bool = True
    """MCP ``ask_human`` may also offer the form to the MCP client's user (elicitation)."""

    @field_validator("callback_hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        from ipaddress import ip_network

        for entry in v:
            text = entry.strip()
            if not text or "://" in text or any(c in text for c in "@ ?#"):
                raise ValueError(f"'{entry}' is not a host name, host:port or CIDR range "
                                 "(write hooks.example.com, hooks.example.com:8443 or "
                                 "10.0.0.0/8, without a scheme or path)")
            if "/" in text:
                try:
                    ip_network(text, strict=False)
                except ValueError:
                    raise ValueError(f"'{entry}' is not a valid CIDR range, e.g. "
                                     "10.0.0.0/8") from None
        return [entry.strip().lower() for entry in v]

    def limits_for(self, client: str) -> AskHumanConfig:
        override = self.clients.get(client)
        return override.ask_human if override and override.ask_human else self.ask_human
