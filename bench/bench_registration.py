"""A new agent's first message: ``register`` then ``send`` at once, until the text is in its pane,
on the dev server as ``up`` runs it beside one left at Temporal's own defaults for timers and
continuing as new (a timer fires no sooner than a second after it is set, and a run continued
as new sooner than a second after it started waits out the rest: a new agent's mailbox does
both); and a message to an agent registered long before, on each, as the control.

    .venv/bin/python -m bench.bench_registration [--agents 20] [--no-save]

Each agent is a recorder pane of a private tmux server; the arrival watcher (a process of its
own) timestamps each message as it lands. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentcomms import temporal as dev_server
from agentcomms.client import GatewayClient
from bench.common import (
    Tmux,
    Watcher,
    latency_page,
    machine,
    summarize,
    temporal,
    write_results,
)

# What `up` sets that the baseline leaves at Temporal's defaults.
TIMING = ("history.timerProcessorMaxTimeShift", "history.workflowIdReuseMinimalInterval")
SETTINGS = {"as up runs it": False, "Temporal's defaults": True}


@contextmanager
def server_settings(temporals_defaults: bool) -> Iterator[None]:
    """The next dev server's settings: `up`'s, or those with Temporal's own timing."""
    kept = dev_server.DEV_SERVER_SETTINGS
    if temporals_defaults:
        flags = list(zip(kept[::2], kept[1::2], strict=True))  # (--dynamic-config-value, KEY=V)
        dev_server.DEV_SERVER_SETTINGS = [
            part for flag in flags if not flag[1].startswith(TIMING) for part in flag
        ]
    try:
        yield
    finally:
        dev_server.DEV_SERVER_SETTINGS = kept


async def first_messages(
    workdir: Path, tmux: Tmux, watcher: Watcher, label: str, agents: int
) -> dict[str, list[float]]:
    """Milliseconds until each message is in its pane: to `agents` new agents (from their
    registration), and as many to one agent registered before (from the send)."""
    new: list[float] = []
    registered: list[float] = []
    async with temporal(workdir / label) as rt:
        rpc = GatewayClient(rt.cfg.server.socket())
        await rpc.connect()
        try:
            for i in range(agents):
                key = f"{label}-{i}"
                pane = tmux.recorder(key, workdir / f"{key}.txt")
                await watcher.add(key, workdir / f"{key}.txt")
                started = time.monotonic_ns()
                await rpc.call(
                    "register", agent_id=key, target=pane.target, socket=pane.socket,
                    submit_delay_ms=0,
                )  # fmt: skip
                await rpc.call("send", agent_id=key, message=f"first {i}")
                if not await watcher.wait_for(key, 1, timeout_s=30):
                    raise RuntimeError(f"{key}'s first message never reached its pane")
                new.append((watcher.arrivals(key)[0][0] - started) / 1e6)
                if i == 0:  # the control's agent, registered before any of its messages
                    for n in range(agents):
                        started = time.monotonic_ns()
                        await rpc.call("send", agent_id=key, message=f"again {n}")
                        if not await watcher.wait_for(key, n + 2, timeout_s=30):
                            raise RuntimeError(f"{key}'s message {n} never reached its pane")
                        registered.append((watcher.arrivals(key)[n + 1][0] - started) / 1e6)
        finally:
            await rpc.close()
    return {"new": new, "registered": registered}


async def run(agents: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="acr-"))  # short: a socket path has 108 bytes
    tmux = Tmux(workdir / "tmux.sock")
    watcher = await Watcher.start()
    results: dict[str, Any] = {"machine": machine(), "agents": agents, "results": {}}
    try:
        for n, (name, defaults) in enumerate(SETTINGS.items()):
            with server_settings(defaults):
                times = await first_messages(workdir, tmux, watcher, f"s{n}", agents)
            results["results"][f"register → first message, {name}"] = summarize(times["new"])
            results["results"][f"a registered agent's message, {name}"] = summarize(
                times["registered"]
            )
    finally:
        await watcher.close()
        tmux.kill_server()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20, help="new agents on each server")
    parser.add_argument("--no-save", dest="save", action="store_false", help="print only")
    args = parser.parse_args(argv)
    results = asyncio.run(run(args.agents))
    about = (
        f"{args.agents} new agents on each dev server, each registered and sent one message at "
        "once; then as many messages to the first of them, each when the last is in the pane."
    )
    page = latency_page("A new agent's first message", results, about, "what")
    print("\n" + page)
    if args.save:
        write_results("registration", results, page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
