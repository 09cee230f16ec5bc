"""The MCP server's only way out: requests to the gateway socket.

Each request opens its own connection (a Unix socket connects in well under a millisecond), so a
gateway restarted between two tool calls is simply found again, and a dead one is reported as such.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, overload

from agentcomms.client import call
from agentcomms.errors import GatewayError, GatewayUnavailable
from agentcomms.errors.mcp import GatewayDown, GatewayRefused
from gateway.results import (
    AgentMessagePosted,
    Agents,
    Calls,
    Events,
    History,
    Hung,
    Replied,
    Status,
    Turn,
    Unread,
    Waited,
)
from mcp_server.identity import token_agent


def down_message(socket: Path) -> str:
    return (
        f"The agentcomms gateway is not running (no answer at {socket}). "
        "Start it with `agentcomms up` (or `agentcomms gateway` beside a worker), then retry."
    )


class GatewayLink:
    def __init__(self, socket: Path) -> None:
        self.socket = socket

    # What the tools read, typed as the methods declare their results (a test holds each to its
    # method's declaration).
    @overload
    async def call(self, method: Literal["check_messages"], **params: Any) -> Unread: ...
    @overload
    async def call(self, method: Literal["wait_messages"], **params: Any) -> Waited: ...
    @overload
    async def call(self, method: Literal["events"], **params: Any) -> Events: ...
    @overload
    async def call(self, method: Literal["status"], **params: Any) -> Status: ...
    @overload
    async def call(self, method: Literal["agents"], **params: Any) -> Agents: ...
    @overload
    async def call(self, method: Literal["agent_message"], **params: Any) -> AgentMessagePosted: ...
    @overload
    async def call(self, method: Literal["reply"], **params: Any) -> Replied: ...
    @overload
    async def call(self, method: Literal["history"], **params: Any) -> History: ...
    @overload
    async def call(self, method: Literal["call"], **params: Any) -> Turn: ...
    @overload
    async def call(self, method: Literal["call_say"], **params: Any) -> Turn: ...
    @overload
    async def call(self, method: Literal["call_end"], **params: Any) -> Hung: ...
    @overload
    async def call(self, method: Literal["calls"], **params: Any) -> Calls: ...
    @overload
    async def call(self, method: str, **params: Any) -> Any: ...

    async def call(self, method: str, **params: Any) -> Any:
        """The method's result; :class:`GatewayDown` or :class:`GatewayRefused` otherwise.

        A request whose bearer token names an agent acts for that agent: the gateway itself
        confines it to what is that agent's own, whichever tool asked.
        """
        try:
            return await call(self.socket, method, caller=token_agent(), **params)
        except GatewayError as exc:
            raise GatewayRefused(exc.code, str(exc)) from None
        except (GatewayUnavailable, OSError):
            # OSError too: a socket we may not open, or a connection reset mid-reply.
            raise GatewayDown(down_message(self.socket)) from None
