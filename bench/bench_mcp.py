"""Round trips of the MCP tools over stdio, beside a bare fastmcp tool measured in the same run.

    .venv/bin/python -m bench.bench_mcp [--calls 200]

Both servers are real processes driven by the official `mcp` SDK client over stdio:
- ``bare``: a fastmcp server whose one tool returns a constant (the floor: MCP framing, JSON,
  pipes, fastmcp's validation);
- ``agentcomms mcp``: ``check_messages`` with an empty inbox and with one message waiting each
  time, ``send_message`` to the human's terminal (``local``: written to the inbox), and
  ``send_agent_message`` to a live recorder pane (the call returns once the text is in the
  pane: gateway → Temporal → local activity → tmux, and back).
The gateway socket's own ``check_messages`` round trip is measured too, to show where time goes.
The stack (Temporal dev server on a database file, worker, gateway) runs in this process, as
``agentcomms up`` runs it. Figures are printed and written to ``bench/results/mcp-latest.*``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

from agentcomms.client import GatewayClient, call
from bench.common import (
    Tmux,
    latency_page,
    machine,
    process_cpu_s,
    summarize,
    temporal,
    write_results,
)

AGENTCOMMS = Path(sys.executable).parent / "agentcomms"
SENDER, TARGET, READER = "bench-sender", "bench-target", "bench-reader"
WARMUP = 10
ROUNDS = 5


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


async def measure(calls: int, *, own_process: bool = False) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="acb-mcp-"))  # short: a socket path has 108 bytes
    tmux = Tmux(tmp / "tmux.sock")
    try:
        home = tmp / "home"
        if own_process:
            with _up(home) as socket:
                async with GatewayClient(socket) as rpc:
                    return await _measure(home, rpc, tmux, calls)
        async with temporal(home) as rt, GatewayClient(rt.cfg.server.socket()) as rpc:
            return await _measure(home, rpc, tmux, calls)
    finally:
        tmux.kill_server()
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _up(home: Path) -> Iterator[Path]:
    """A real `agentcomms up` of this checkout in `home`, as a user runs it beside the agents'
    MCP servers: its socket."""
    from tests.fakes.serve import free_port
    from tests.support.cli import env_for, start_up, stop, wait_for_line

    env = env_for(
        home,
        AGENTCOMMS_TEMPORAL__ADDRESS=f"127.0.0.1:{free_port()}",
        AGENTCOMMS_TEMPORAL__UI_PORT=str(free_port()),
    )
    proc = start_up(env, "--headless")
    try:
        wait_for_line(proc, "Database", timeout=120)
        # What it prints later is read and dropped: a full pipe would stall its event loop.
        threading.Thread(target=lambda: proc.stdout and proc.stdout.read(), daemon=True).start()
        yield home / "daemon.sock"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            stop(proc)


async def _measure(home: Path, rpc: GatewayClient, tmux: Tmux, calls: int) -> dict[str, Any]:
    pane_file = home.parent / "target.bytes"
    pane = tmux.recorder(TARGET, pane_file)
    await rpc.call(
        "register", agent_id=TARGET, target=pane.target, socket=pane.socket, submit_delay_ms=0
    )
    env = {"AGENTCOMMS_HOME": str(home)}
    async with (
        session(sys.executable, ["-m", "bench.bench_mcp", "--bare-server"], {}) as bare,
        session(str(AGENTCOMMS), ["mcp", "--agent", SENDER], env) as mcp,
        session(str(AGENTCOMMS), ["mcp", "--agent", READER], env) as reader,
    ):
        # The reader finds one message waiting at each call; the sender's inbox stays empty.
        for i in range(calls + WARMUP * ROUNDS):
            await rpc.call("send", agent_id=READER, message=f"waiting {i}")

        async def socket_check() -> None:
            await rpc.call("check_messages", agent_id=SENDER, limit=1)

        async def fresh_check() -> None:
            await call(rpc.path, "check_messages", agent_id=SENDER, limit=1)

        rows: dict[str, Callable[[], Awaitable[Any]]] = {
            "bare constant tool": tool_call(bare, "constant", {}, lambda r: r == {"ok": True}),
            "check_messages (nothing new)": tool_call(
                mcp, "check_messages", {}, lambda r: r["messages"] == []
            ),
            "check_messages (one new)": tool_call(
                reader, "check_messages", {"limit": 1}, lambda r: len(r["messages"]) == 1
            ),
            "send_message (local: the terminal's inbox)": tool_call(
                mcp,
                "send_message",
                {"provider": "local", "chat_id": "local", "message": "bench"},
                lambda r: r["success"] is True,
            ),
            "send_agent_message (until in pane)": tool_call(
                mcp,
                "send_agent_message",
                {"to_agent_id": TARGET, "message": "bench"},
                lambda r: r["delivered"] is True,
            ),
            "gateway socket check_messages": socket_check,
            "gateway socket check_messages, a connection each": fresh_check,
        }
        # The rows take turns, a round each, so a busy moment of the machine weighs on all.
        figures: dict[str, list[float]] = {name: [] for name in rows}
        # The CPU the MCP server process spends per call: it swings far less with the
        # machine's load than a round trip does.
        servers = {"bare": _server_pid("--bare-server"), "mcp": _server_pid(f"--agent {SENDER}")}
        cpu: dict[str, float] = dict.fromkeys(rows, 0.0)
        for _ in range(ROUNDS):
            for name, row in rows.items():
                pid = servers["bare" if name.startswith("bare") else "mcp"]
                before = process_cpu_s(pid) if pid else 0.0
                figures[name] += await timed(row, calls // ROUNDS)
                cpu[name] += (process_cpu_s(pid) if pid else 0.0) - before
    typed = pane_file.read_bytes().count(f"[from: {SENDER}] bench\r".encode())
    expected = (calls // ROUNDS + WARMUP) * ROUNDS
    if typed != expected:
        raise AssertionError(f"{typed} messages in the pane, expected {expected}")
    per_call = (calls // ROUNDS + WARMUP) * ROUNDS
    # The reader's row runs in another server than the one measured, the socket's in none.
    measured = [n for n in rows if "one new" not in n and not n.startswith("gateway")]
    return {
        name: {
            **summarize(values),
            "server_cpu_ms": round(cpu[name] * 1000 / per_call, 2) if name in measured else None,
        }
        for name, values in figures.items()
    }


def _server_pid(marker: str) -> int | None:
    """The MCP server process (a child of this one) whose command line holds `marker`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if parent == os.getpid() and marker in command:
            return int(entry.name)
    return None


def markdown(report: dict[str, Any]) -> str:
    about = (
        f"{report['calls']} sequential calls per row over stdio, in {ROUNDS} rounds taking turns; "
        "x bare: the row's p50 over the bare tool's."
    )
    page = latency_page("MCP benchmark", report, about, "round trip")
    bare = report["results"]["bare constant tool"]["p50"]
    ratios = [
        f"| {name} | {s['p50']} | {s['p50'] / bare:.1f}x | {s['server_cpu_ms'] or ''} |"
        for name, s in report["results"].items()
    ]
    head = "\n| round trip | p50 ms | x bare | MCP server CPU ms/call |\n|---|---:|---:|---:|\n"
    return page + head + "\n".join(ratios) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per tool")
    parser.add_argument("--no-save", dest="save", action="store_false", help="print only")
    parser.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--gateway-process",
        action="store_true",
        help="run the stack as `agentcomms up` in a process of its own, not in the bench's",
    )
    args = parser.parse_args()
    if args.bare_server:
        run_bare_server()
        return
    report = {"machine": machine(), "calls": args.calls, "gateway_process": args.gateway_process}
    report["results"] = asyncio.run(measure(args.calls, own_process=args.gateway_process))
    text = markdown(report)
    print(text)
    if args.save:
        write_results("mcp-gateway-process" if args.gateway_process else "mcp", report, text)


if __name__ == "__main__":
    main()
