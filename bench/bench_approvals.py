"""How long an approval takes each way, beside the bare hook measured in the same run.

    .venv/bin/python -m bench.bench_approvals [--runs 20]

The stack (Temporal dev server, worker, gateway) runs in this process, as `agentcomms up` runs
it; the hook is a real `agentcomms hook claude-code` process given a `PermissionRequest`, as
Claude Code runs it. Measured per run:

- the bare hook: a `PreToolUse` report, start to exit (what every hook costs);
- hook start → the approval listed by `agentcomms approvals` (the gateway opened it, Temporal's
  visibility shows it);
- the human's answer (`approval_decide` on the socket) → the hook's decision on its stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentcomms.client import GatewayClient
from bench.common import latency_page, machine, summarize, temporal, write_results

AGENTCOMMS = str(Path(sys.executable).parent / "agentcomms")
AGENT = "bench-agent"
PERMISSION = {
    "session_id": "bench",
    "hook_event_name": "PermissionRequest",
    "tool_name": "Bash",
    "tool_input": {"command": "touch bench.txt"},
    "permission_suggestions": [],
}


async def _hook(payload: dict[str, Any]) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        AGENTCOMMS, "hook", "claude-code",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "AGENTCOMMS_AGENT_ID": AGENT},
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(payload).encode())
    proc.stdin.close()
    return proc


async def _listed(gw: GatewayClient, seen: set[str]) -> str:
    while True:
        for a in (await gw.call("approvals"))["approvals"]:
            if a["id"] not in seen:
                return str(a["id"])
        await asyncio.sleep(0.005)


async def run(runs: int) -> dict[str, Any]:
    bare: list[float] = []
    opened: list[float] = []
    answered: list[float] = []
    with tempfile.TemporaryDirectory(prefix="acb-") as tmp:
        home = Path(tmp) / "h"
        async with temporal(home):
            os.environ["AGENTCOMMS_HOME"] = str(home)
            os.environ.pop("TMUX", None)
            seen: set[str] = set()
            async with GatewayClient(home / "daemon.sock") as gw:
                for _ in range(runs):
                    started = time.perf_counter()
                    proc = await _hook({**PERMISSION, "hook_event_name": "PreToolUse"})
                    await proc.wait()
                    bare.append((time.perf_counter() - started) * 1000)

                    started = time.perf_counter()
                    proc = await _hook(PERMISSION)
                    approval = await _listed(gw, seen)
                    opened.append((time.perf_counter() - started) * 1000)
                    seen.add(approval)

                    assert proc.stdout is not None
                    started = time.perf_counter()
                    await gw.call("approval_decide", id=approval, behavior="allow", by="bench")
                    line = await proc.stdout.readline()
                    answered.append((time.perf_counter() - started) * 1000)
                    assert b'"allow"' in line, line
                    await proc.wait()
    return {
        "machine": machine(),
        "runs": runs,
        "results": {
            "bare hook (PreToolUse report), start to exit": summarize(bare),
            "PermissionRequest hook start → approval listed": summarize(opened),
            "answer → the hook's decision printed": summarize(answered),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(run(args.runs))
    page = latency_page(
        "Approvals",
        results,
        f"{args.runs} runs of each, one after another; the hook a real process.",
        "what",
    )
    print(page)
    if not args.no_save:
        write_results("approvals", results, page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
