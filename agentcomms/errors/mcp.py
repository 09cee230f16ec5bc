"""The MCP server's errors. The ``ToolError`` ones are what a tool answers instead of a result: the
message reaches the agent as the tool's error text, so it says what was wrong and what to do.

Not re-exported by :mod:`agentcomms.errors`: they subclass fastmcp's ``ToolError``, and every
other process (and every workflow sandbox) would load fastmcp to reach the rest.
"""

from __future__ import annotations

from fastmcp.exceptions import ToolError

from agentcomms.errors.base import AgentcommsError


class GatewayDown(ToolError):
    """The gateway socket does not answer; the message says how to start it."""


class GatewayRefused(ToolError):
    """The gateway answered with an error reply (bad input, unknown agent, no transport…)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class NotYourIdentity(ToolError):
    """The connection's bearer token belongs to another agent than the one asked for."""


class InvalidArgument(ToolError):
    """An argument passed the schema but makes no sense (e.g. a chat id the provider lacks)."""


class ServeRefused(AgentcommsError):
    """`agentcomms mcp` cannot start as asked (e.g. HTTP off loopback without tokens)."""
