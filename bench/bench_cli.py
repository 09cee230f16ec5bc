"""How long the quick CLI commands take, beside a bare interpreter start measured in the same run.

    .venv/bin/python -m bench.bench_cli [--runs 20]

Scripts and agent hooks call `agentcomms send`, `status`, `agents`… many times, so each must answer
at once. The stack (Temporal dev server, worker, gateway) runs in this process, as `agentcomms up`
runs it; each command is a real process talking to the gateway socket. Figures are wall times,
medians over `--runs` interleaved runs, and their ratio to `python -c pass`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine, temporal, write_results

AGENTCOMMS = str(Path(sys.executable).parent / "agentcomms")
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "agentcomms send": [AGENTCOMMS, "send", "bench-agent", "hello"],
    "agentcomms agents": [AGENTCOMMS, "agents", "--all"],
    "agentcomms status": [AGENTCOMMS, "status", "--json"],
    "agentcomms send --help": [AGENTCOMMS, "send", "--help"],
}


async def wall_ms(argv: list[str]) -> float:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    if proc.returncode not in (0, None):
        raise AssertionError(f"{' '.join(argv[1:])} failed: {err.decode()[-300:]}")
    return (time.perf_counter() - started) * 1000


async def run(runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="acc-") as tmp:
        async with temporal(Path(tmp) / "h"):
            os.environ.pop("TMUX", None)  # the commands talk to the bench's gateway only
            times: dict[str, list[float]] = {name: [] for name in COMMANDS}
            for _ in range(runs):  # interleaved, so a busy moment hits every command alike
                for name, argv in COMMANDS.items():
                    times[name].append(await wall_ms(argv))
    bare = statistics.median(times["python -c pass"])
    return {
        "machine": machine(),
        "runs": runs,
        "median_ms": {n: round(statistics.median(t), 1) for n, t in times.items()},
        "x_bare": {n: round(statistics.median(t) / bare, 1) for n, t in times.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(run(args.runs))
    lines = [
        "# CLI start-up benchmark",
        "",
        f"{results['machine']['cpus']} CPUs, Python {results['machine']['python']}, load "
        f"average {results['machine']['load_average']}; median of {args.runs} interleaved runs.",
        "",
        "| command | median ms | x python -c pass |",
        "|---|---:|---:|",
        *(f"| `{n}` | {results['median_ms'][n]} | {results['x_bare'][n]}x |" for n in COMMANDS),
        "",
    ]
    print("\n".join(lines))
    if not args.no_save:
        write_results("cli", results, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
