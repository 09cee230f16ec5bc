"""How long the quick CLI commands take, beside a bare interpreter start measured in the same run.

    .venv/bin/python -m bench.bench_cli [--runs 20]

Scripts and agent hooks call `agentcomms send`, `status`, `agents`… many times, so each must answer
at once (the aim: at most 12 times a bare interpreter's start). The stack (Temporal dev server,
worker, gateway) runs in this process, as `agentcomms up` runs it; each command is a real process
talking to the gateway socket. Figures are wall times over `--runs` interleaved runs (p50, min,
max) and the ratio of each p50 to that of `python -c pass`. `--help` goes through typer, as it
should: only the commands' own answers take the quick path.
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
    "agentcomms send --json": [AGENTCOMMS, "send", "bench-agent", "hello", "--json"],
    "agentcomms status": [AGENTCOMMS, "status"],
    "agentcomms status --json": [AGENTCOMMS, "status", "--json"],
    "agentcomms agents --all": [AGENTCOMMS, "agents", "--all"],
    "agentcomms channels": [AGENTCOMMS, "channels"],
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
        "p50_ms": {n: round(statistics.median(t), 1) for n, t in times.items()},
        "min_ms": {n: round(min(t), 1) for n, t in times.items()},
        "max_ms": {n: round(max(t), 1) for n, t in times.items()},
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
        f"average {results['machine']['load_average']}; {args.runs} interleaved runs of each, "
        "wall time of the whole process; the ratio is of the p50s (aim: at most 12x).",
        "",
        "| command | p50 ms | min ms | max ms | x python -c pass |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| `{n}` | {results['p50_ms'][n]} | {results['min_ms'][n]} | "
            f"{results['max_ms'][n]} | {results['x_bare'][n]}x |"
            for n in COMMANDS
        ),
        "",
    ]
    print("\n".join(lines))
    if not args.no_save:
        write_results("cli", results, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
