"""The MCP server as its clients see it: the tools it offers, called in memory (fastmcp's
Client) or over stdio (the official `mcp` SDK driving a real `agentcomms mcp` process)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastmcp import Client, FastMCP
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.support.cli import AGENTCOMMS
from tests.support.home import write_config

# Every tool the server offers, as existing setups call them.
TOOLS = {
    "check_messages",
    "wait_for_messages",
    "get_agent_events",
    "daemon_status",
    "list_agents",
    "send_agent_message",
    "send_message",
    "list_channels",
    "get_messages",
    "initiate_call",
    "continue_call",
    "speak_to_user",
    "end_call",
    "list_active_calls",
}


async def call(server: FastMCP, tool: str, **args: Any) -> Any:
    """`tool` called in memory; its structured result."""
    async with Client(server) as client:
        return (await client.call_tool(tool, args)).structured_content


def make_home(tmp_path: Path, stack_socket: Path, agents: dict[str, Any] | None = None) -> Path:
    """An AGENTCOMMS_HOME whose config points the MCP server at the stack's gateway socket."""
    home = tmp_path / "mcp-home"
    write_config(home, {"server": {"socket_path": str(stack_socket)}, "agents": agents or {}})
    return home


@asynccontextmanager
async def stdio_session(
    home: Path, errlog: Path, *, agent: str | None = None, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """`agentcomms mcp` (as `agent`, if given) over stdio, initialized; its stderr into `errlog`."""
    params = StdioServerParameters(
        command=AGENTCOMMS,
        args=["mcp", *(["--agent", agent] if agent else [])],
        env={"AGENTCOMMS_HOME": str(home), **(env or {})},
    )
    with errlog.open("a") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def tool(session: ClientSession, name: str, **args: Any) -> dict[str, Any]:
    """`name` called over the session; its structured result, which must not be an error."""
    result = await session.call_tool(name, args)
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content
