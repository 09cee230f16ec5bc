"""A process agent (ACP) beside a pane agent (tmux), in one run of one stack.

    .venv/bin/python -m bench.bench_process [--runs 20]

The stack (Temporal dev server, worker, gateway) runs in this process, as `agentcomms up` runs
it. The process agent is the tests' scripted ACP agent, a real process the worker started; the
pane agent a recorder pane on a private tmux server. Measured per run:

- `send` → the prompt at the process agent (its log has it) / the text in the pane (the
  recorder's file has it);
- the process agent's permission request (its own clock as it asks) → the request with its
  buttons at the Telegram Bot API (the tests' fake, driven by the real SDK), beside a pane
  agent's `PermissionRequest` hook process started → its buttons there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from agentcomms.client import GatewayClient
from agentcomms.store import Store
from bench.bench_approvals import AGENT as PANE_AGENT
from bench.bench_approvals import PERMISSION, _buttons, _hook
from bench.common import Tmux, Watcher, latency_page, machine, summarize, temporal, write_results
from tests.fakes.telegram import FakeTelegram
from tests.support import acp_agent
from tests.support.chat import CHAT, with_telegram
from tests.support.waiting import eventually

PROCESS_AGENT = "bench-process"
PANE_CHAT = CHAT + 1  # the pane agent's chat, beside Alice's with the process agent
POLL_S = 0.002


def _log(folder: Path) -> list[dict[str, Any]]:
    path = folder / ".acp-agent.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _prompts(folder: Path, count: int) -> bool:
    return sum(1 for e in _log(folder) if "prompt" in e) >= count


async def _ready(store: Store, agent: str) -> bool:
    row = await store.get_agent(agent)
    return row is not None and row.state == "ready"


async def run(runs: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {k: [] for k in ("prompt", "typed", "asked", "hooked")}
    telegram = FakeTelegram()
    telegram.known_chats.update({CHAT, PANE_CHAT})
    channels = {f"telegram:{CHAT}": PROCESS_AGENT, f"telegram:{PANE_CHAT}": PANE_AGENT}
    with tempfile.TemporaryDirectory(prefix="acp-") as tmp:
        root = Path(tmp)
        work = root / "work"
        work.mkdir()
        tmux = Tmux(root / "tmux.sock")
        watcher = await Watcher.start()
        configure = with_telegram(telegram, PROCESS_AGENT, channels=channels)
        try:
            async with telegram.server, temporal(root / "h", configure=configure) as rt:
                pane = tmux.recorder("rec", root / "pane.out")
                await watcher.add("pane", root / "pane.out")
                async with GatewayClient(root / "h" / "daemon.sock") as gw:
                    await gw.call(
                        "register", agent_id=PANE_AGENT, target=pane.target,
                        socket=pane.socket, submit_delay_ms=0,
                    )  # fmt: skip
                    command = [sys.executable, acp_agent.__file__]
                    await gw.call(
                        "start_agent", agent_id=PROCESS_AGENT, dir=str(work), command=command
                    )
                    await eventually(partial(_ready, rt.store, PROCESS_AGENT), timeout=30)
                    for n in range(1, runs + 1):
                        started = time.perf_counter()
                        await gw.call("send", agent_id=PROCESS_AGENT, message=f"run {n}")
                        await eventually(partial(_prompts, work, n), interval=POLL_S)
                        times["prompt"].append((time.perf_counter() - started) * 1000)
                        await eventually(partial(_ready, rt.store, PROCESS_AGENT))

                        started = time.perf_counter()
                        await gw.call("send", agent_id=PANE_AGENT, message=f"run {n}")
                        await watcher.wait_for("pane", n, 30)
                        times["typed"].append((time.perf_counter() - started) * 1000)
                    for n in range(runs):
                        shown = len(telegram.sent)
                        await gw.call(
                            "send", agent_id=PROCESS_AGENT, message=f"acp:ask 4 touch {n}"
                        )
                        message = await eventually(
                            partial(_buttons, telegram, shown), interval=POLL_S
                        )
                        seen = time.monotonic_ns()
                        asked = [e for e in _log(work) if "asking" in e][-1]
                        times["asked"].append((seen - asked["at_ns"]) / 1e6)
                        data = message["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
                        telegram.human_presses(message, data, user_id=CHAT)
                        await eventually(partial(_ready, rt.store, PROCESS_AGENT), timeout=30)

                        shown = len(telegram.sent)
                        started = time.perf_counter()
                        hook = await _hook(PERMISSION)
                        await eventually(partial(_buttons, telegram, shown), interval=POLL_S)
                        times["hooked"].append((time.perf_counter() - started) * 1000)
                        hook.kill()
                        await hook.wait()
        finally:
            await watcher.close()
            tmux.kill_server()
    return {
        "machine": machine(),
        "runs": runs,
        "results": {
            "send → the prompt at the process agent (ACP)": summarize(times["prompt"]),
            "send → the text in the pane agent's pane (tmux)": summarize(times["typed"]),
            "process agent asks permission → buttons at Telegram": summarize(times["asked"]),
            "pane agent's PermissionRequest hook start → buttons at Telegram": summarize(
                times["hooked"]
            ),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(run(args.runs))
    page = latency_page(
        "Process agents beside pane agents",
        results,
        f"{args.runs} runs of each, one after another, in one stack.",
        "what",
    )
    print(page)
    if not args.no_save:
        write_results("process", results, page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
