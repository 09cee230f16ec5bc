"""The agent-facing MCP server: the tools agents already know, over stdio or streamable HTTP, backed by the
gateway socket (see :func:`build_server` and ``agentcomms mcp``)."""

from mcp_server.server import build_server

__all__ = ["build_server"]
