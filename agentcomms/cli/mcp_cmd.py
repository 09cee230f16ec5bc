"""`agentcomms mcp`: the agent-facing MCP server (a thin client of the gateway socket)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from agentcomms.cli import app
from agentcomms.cli.common import run_async, user_errors
from agentcomms.config import load_sections


class Transport(StrEnum):
    stdio = "stdio"
    http = "http"


@app.command()
def mcp(
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            "-a",
            help="Who the agent is when a tool is not told (else AGENTCOMMS_AGENT_ID, else 'default').",
        ),
    ] = None,
    transport: Annotated[
        Transport, typer.Option("--transport", "-t", help="stdio (default) or streamable http.")
    ] = Transport.stdio,
    host: Annotated[
        str, typer.Option("--host", help="HTTP: address to bind; off loopback needs tokens.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=1, max=65535, help="HTTP: port.")] = 8766,
) -> None:
    """Serve the agentcomms tools over MCP, for Claude Code, Codex or any MCP client.

    stdio is how coding agents start MCP servers (`claude mcp add agentcomms -- agentcomms mcp
    --agent backend`). With `--transport http` it serves streamable HTTP at /mcp; bearer tokens
    from `agents.<id>.token` then identify each agent (required unless bound to loopback).
    Needs the gateway (`agentcomms up`); tools say so when it is not running.
    """
    from agentcomms.logs import setup_logging
    from mcp_server.serve import serve

    # Only what the server uses: the gateway's socket, its logging, and over HTTP the agents'
    # tokens. The provider credentials and the deployment key are the gateway's, and need not
    # be set (`${TELEGRAM_BOT_TOKEN}`) where the agents run.
    sections = ["server", "logging"] + (["agents"] if transport == Transport.http else [])
    with user_errors():
        cfg = load_sections(sections)
    setup_logging(cfg.logging)  # stderr (and a file): stdout belongs to the stdio protocol
    run_async(serve, cfg, transport=transport.value, host=host, port=port, agent=agent)
