"""The MCP server's only way out: requests to the gateway socket.

One connection serves every tool call (requests on it run side by side), opened at the first and
closed with the server: a connection of its own for each call costs both ends its setup (0.3 to
2.8 ms more than the gateway's answer on a loaded machine, `bench/bench_mcp.py`). A gateway
restarted between two tool calls closed that connection, and the next call opens a new one; a
dead gateway is reported as such.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal, overload

from agentcomms.client import GatewayClient
from agentcomms.errors import GatewayError, GatewayUnavailable
from agentcomms.errors.mcp import GatewayDown, GatewayRefused
from gateway.socket.results import (
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
        self._client: GatewayClient | None = None
        # Opening the connection once, also when the first calls come together.
        self._opening: asyncio.Lock | None = None

    async def _connected(self) -> GatewayClient:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            client = self._client
            if client is None or not client.open:
                if client is not None:
                    await client.close()
                self._client = None
                client = GatewayClient(self.socket)
                await client.connect()
                self._client = client
            return client

    async def close(self) -> None:
        """Close the connection (the server stops, or its session with a client ended)."""
        client, self._client, self._opening = self._client, None, None
        if client is not None:
            await client.close()

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
            client = await self._connected()
            return await client.call_as(token_agent(), method, **params)
        except GatewayError as exc:
            raise GatewayRefused(exc.code, str(exc)) from None
        except (GatewayUnavailable, OSError):
            # OSError too: a socket we may not open, or a connection reset mid-reply. The next
            # call connects again.
            await self.close()
            raise GatewayDown(down_message(self.socket)) from None
