"""The door for external agents: the HTTP API (``/api/v1``), its webhooks and OpenAPI
document. The MCP server (``bot.mcp``) builds on the same ``Door`` service.

Only the engine is imported; the engine knows nothing about HTTP. Every error is an
RFC 9457 ``application/problem+json`` document (``problems``).
"""
