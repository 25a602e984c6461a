"""The MCP server: ``ask_human`` and ``request_approval`` for any MCP client.

Built on the official ``mcp`` SDK's low-level ``Server`` (``tools``) so the
``ask_human`` input schema is exactly Dify's v1 args schema. Two transports share it:
``/mcp`` (Streamable HTTP inside ``askhuman serve``, same bearer keys as the API;
``http``) and ``askhuman mcp`` (stdio, talking to a running server's API with
``ASKHUMAN_API_KEY``; ``stdio``). The tools only see a ``Backend`` (``backend``).
"""
