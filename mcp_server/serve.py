"""Run the MCP server: stdio (how Claude Code and Codex start servers) or streamable HTTP.

Over HTTP, configured tokens (``agents.<id>.token``) are always required and each fixes its
agent's identity; without any token the server only binds to loopback. Either way it answers only
to its own Host and to requests that carry no other site's Origin (``agentcomms.http_guard``): a
web page the user visits cannot reach it through DNS rebinding, and a browser cannot send it
anything from another site.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

from starlette.middleware import Middleware

from agentcomms.config import Config
from agentcomms.errors.mcp import ServeRefused
from agentcomms.http_guard import Doorman, Guard
from mcp_server.identity import AgentTokens, default_agent_id, is_loopback
from mcp_server.server import build_server

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http"]
DEFAULT_HTTP_PORT = 8766  # beside the gateway's 8765
MCP_PATH = "/mcp"


async def serve(
    cfg: Config,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_HTTP_PORT,
    agent: str | None = None,
) -> None:
    default_agent = default_agent_id(agent)
    socket: Path = cfg.server.socket()
    if transport == "stdio":
        # stdout is the protocol channel: nothing else may be printed there (logs go to stderr).
        server = build_server(socket, default_agent=default_agent)
        await server.run_stdio_async(show_banner=False)
        return
    tokens = AgentTokens.from_config(cfg)
    if tokens is None and not is_loopback(host):
        raise ServeRefused(
            f"Refusing to serve MCP over HTTP on {host} without bearer tokens: anyone who can "
            "reach it could act as an agent. Give each agent a token in the config "
            '(agents.<id>.token, e.g. "${BACKEND_MCP_TOKEN}") or bind to 127.0.0.1.'
        )
    server = build_server(socket, default_agent=default_agent, auth=tokens)
    who = f"tokens of {', '.join(tokens.agents)}" if tokens else f"no token, agent {default_agent}"
    log.info("MCP over HTTP at http://%s:%d%s (%s)", host, port, MCP_PATH, who)
    if tokens is None:
        # Loopback is not private on a shared machine: every local user can reach the port.
        log.warning(
            "no agent has a token, so any user of this machine can call these tools as any "
            "agent (and type into its pane); on a shared machine give each agent a token "
            "(agents.<id>.token)"
        )
    guard = Middleware(Guard, doorman=Doorman(host, port, names=cfg.server.allowed_hosts))
    await server.run_http_async(
        host=host, port=port, path=MCP_PATH, show_banner=False, middleware=[guard]
    )
