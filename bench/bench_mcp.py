"""Round trips of the MCP tools over stdio, beside a bare fastmcp tool measured in the same run.

    .venv/bin/python -m bench.bench_mcp [--calls 200]

Both servers are real processes driven by the official `mcp` SDK client over stdio:
- ``bare``: a fastmcp server whose one tool returns a constant (the floor: MCP framing, JSON,
  pipes, fastmcp's validation);
- ``agentcomms mcp``: ``check_messages`` with an empty inbox and with one message waiting each
  time, and ``send_agent_message`` to a live recorder pane (the call returns once the text is in the
  pane: gateway → Temporal → local activity → tmux, and back).
The gateway socket's own ``check_messages`` round trip is measured too, to show where time goes.
The stack (Temporal dev server on a database file, worker, gateway) runs in this process, as
``agentcomms up`` runs it. Figures are printed and written to ``bench/results/mcp.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

from agentcomms.client import GatewayClient
from agentcomms.config import Config, DatabaseConfig, ServerConfig, TemporalConfig
from agentcomms.store import Store
from agentcomms.temporal import temporal_binary
from bench.pipelines import TmuxServer, dev_server
from bench.system import machine_info, summarize
from gateway.service import Gateway
from workers.main import build_workers

RESULTS = Path(__file__).resolve().parent / "results"
AGENTCOMMS = Path(sys.executable).parent / "agentcomms"
SENDER, TARGET = "bench-sender", "bench-target"
WARMUP = 10


def run_bare_server() -> None:
    """The baseline: the same framework and transport, a tool that does nothing."""
    from fastmcp import FastMCP

    bare = FastMCP("bare")

    @bare.tool
    def constant() -> dict[str, bool]:
        """Return a constant."""
        return {"ok": True}

    asyncio.run(bare.run_stdio_async(show_banner=False))


@asynccontextmanager
async def session(
    command: str, args: list[str], env: dict[str, str]
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command, args=args, env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


async def timed(call: Callable[[], Awaitable[Any]], count: int) -> list[float]:
    """Milliseconds of `count` sequential calls, after a warm-up."""
    for _ in range(WARMUP):
        await call()
    times = []
    for _ in range(count):
        start = time.perf_counter_ns()
        await call()
        times.append((time.perf_counter_ns() - start) / 1e6)
    return times


def tool_call(
    s: ClientSession, name: str, args: dict[str, Any], check: Callable[[Any], bool]
) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        result = await s.call_tool(name, args)
        if result.is_error or not check(result.structured_content):
            raise AssertionError(f"{name}: unexpected result {result.content}")

    return call


@asynccontextmanager
async def stack(tmp: Path) -> AsyncIterator[tuple[Config, GatewayClient]]:
    """Temporal dev server, worker, gateway: everything `agentcomms up` runs."""
    async with AsyncExitStack() as exits:
        dev = await exits.enter_async_context(dev_server(tmp / "temporal.db"))
        cfg = Config(
            server=ServerConfig(socket_path=tmp / "daemon.sock"),
            temporal=TemporalConfig(address=dev.address, task_queue=f"bench-{uuid.uuid4()}"),
            database=DatabaseConfig(url=f"sqlite+aiosqlite:///{tmp / 'agentcomms.db'}"),
        )
        store = await Store.open(cfg.database.resolved_url())
        exits.push_async_callback(store.close)
        host = f"bench-{uuid.uuid4().hex[:8]}"
        for worker in build_workers(dev.client, cfg, store, host=host):
            await exits.enter_async_context(worker)
        gateway = Gateway(cfg, dev.client, store, host=host)
        await gateway.start()
        exits.push_async_callback(gateway.close)
        rpc = await exits.enter_async_context(GatewayClient(cfg.server.socket()))
        yield cfg, rpc


def private_home(tmp: Path, cfg: Config) -> Path:
    home = tmp / "home"
    home.mkdir(mode=0o700)
    config = home / "config.json"
    config.write_text(json.dumps({"server": {"socket_path": str(cfg.server.socket())}}))
    config.chmod(0o600)
    return home


async def measure(calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp_name:
        tmp = Path(tmp_name)
        tmux = TmuxServer(tmp / "tmux.sock")
        try:
            async with stack(tmp) as (cfg, rpc):
                return await _measure(tmp, cfg, rpc, tmux, calls)
        finally:
            tmux.kill_server()


async def _measure(
    tmp: Path, cfg: Config, rpc: GatewayClient, tmux: TmuxServer, calls: int
) -> dict[str, Any]:
    pane_file = tmp / "target.bytes"
    pane = tmux.recorder(TARGET, pane_file)
    await rpc.call(
        "register", agent_id=TARGET, target=pane.target, socket=pane.socket, submit_delay_ms=0
    )
    env = {"AGENTCOMMS_HOME": str(private_home(tmp, cfg))}
    figures: dict[str, list[float]] = {}
    async with (
        session(sys.executable, ["-m", "bench.bench_mcp", "--bare-server"], {}) as bare,
        session(str(AGENTCOMMS), ["mcp", "--agent", SENDER], env) as mcp,
    ):
        figures["bare constant tool"] = await timed(
            tool_call(bare, "constant", {}, lambda r: r == {"ok": True}), calls
        )
        figures["check_messages (nothing new)"] = await timed(
            tool_call(mcp, "check_messages", {}, lambda r: r["messages"] == []), calls
        )
        for i in range(calls + WARMUP):
            await rpc.call("send", agent_id=SENDER, message=f"waiting {i}")
        figures["check_messages (one new)"] = await timed(
            tool_call(mcp, "check_messages", {"limit": 1}, lambda r: len(r["messages"]) == 1),
            calls,
        )
        figures["send_agent_message (until in pane)"] = await timed(
            tool_call(
                mcp,
                "send_agent_message",
                {"to_agent_id": TARGET, "message": "bench"},
                lambda r: r["delivered"] is True,
            ),
            calls,
        )

        async def socket_check() -> None:
            await rpc.call("check_messages", agent_id=SENDER, limit=1)

        figures["gateway socket check_messages"] = await timed(socket_check, calls)
    typed = pane_file.read_bytes().count(f"[from: {SENDER}] bench\r".encode())
    if typed != calls + WARMUP:
        raise AssertionError(f"{typed} messages in the pane, expected {calls + WARMUP}")
    return {name: summarize(values) for name, values in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per tool")
    parser.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_server:
        run_bare_server()
        return
    results = asyncio.run(measure(args.calls))
    print(f"{'round trip over stdio (ms)':40} {'p50':>8} {'p99':>8} {'mean':>8} {'max':>8}")
    for name, s in results.items():
        print(f"{name:40} {s['p50']:8.2f} {s['p99']:8.2f} {s['mean']:8.2f} {s['max']:8.2f}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "mcp.json"
    report = {"machine": machine_info(temporal_binary()), "calls": args.calls, "results": results}
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
