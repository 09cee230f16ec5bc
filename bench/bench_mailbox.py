"""Benchmark the durable mailbox against a bare Temporal pipeline and a direct tmux send-keys.

    .venv/bin/python -m bench.bench_mailbox [--messages 40] [--agents 20] [--latency-messages 300]

Everything runs in this process (client, gateway and worker, as in FIELD-NOTES' figures) except
the Temporal dev server (one fresh server per Temporal pipeline, on a database file), the tmux
server, and the arrival watcher. Figures are printed and written to ``bench/results/``; see
``bench/README.md`` for what each one means.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.runtime import Runtime

from agentcomms.temporal import temporal_binary
from bench.measure import Recorder, measure_latency, measure_throughput
from bench.pipelines import (
    BareTemporal,
    Bridge,
    DirectTmux,
    Mailbox,
    Pipeline,
    TmuxServer,
    bench_runtime,
    dev_server,
)
from bench.report import aims, markdown
from bench.system import CpuMeter, machine_info, summarize
from bench.watch import Watcher

_VARYING = re.compile(r"[0-9a-f]{8}-[0-9a-f-]{27}[:0-9]*|\b\d+(\.\d+)?\b")
_CORE_TARGET = re.compile(r"\[[\w:]+::[\w:]+\]\s*")
_TASK_DURATION = re.compile(r"workflow_task_duration\W+(\d+)")
RESULTS = Path(__file__).resolve().parent / "results"
PIPELINES = ("tmux", "bridge", "bare-activity", "bare-local", "mailbox")


class WarningCounter(logging.Handler):
    """Counts warnings and errors (the worker's "Workflow task not found" among them) per phase."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()
        self.longest_task_ms = 0

    def emit(self, record: logging.LogRecord) -> None:
        # Ids and durations differ in every record; the kind of warning is what is counted.
        # Core warnings end in a dict of fields, in no fixed order.
        text = _CORE_TARGET.sub("", record.getMessage().split("\n", 1)[0]).split(" {", 1)[0]
        text = _VARYING.sub("#", text)[:100]
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text += f" [{type(exc).__name__}: {str(exc).splitlines()[0][:120]}]"
        self.counts[f"{record.levelname} {record.name.split('-')[0]}: {text}"] += 1
        if duration := _TASK_DURATION.search(record.getMessage()):
            self.longest_task_ms = max(self.longest_task_ms, int(duration.group(1)))

    def take(self) -> dict[str, int]:
        counts, self.counts = dict(self.counts), Counter()
        if self.longest_task_ms:
            counts[f"(longest workflow task reported: {self.longest_task_ms} ms)"] = 1
        self.longest_task_ms = 0
        return counts


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.tmux = TmuxServer(workdir / "tmux.sock")
        self.warnings = WarningCounter()
        logging.getLogger().addHandler(self.warnings)
        self.watcher: Watcher

    def recorder(self, slug: str, name: str) -> Recorder:
        key = f"{slug}-{name}"
        file = self.workdir / f"{key}.bytes"
        return Recorder(key=key, pane=self.tmux.recorder(key, file), file=file)

    async def phase(
        self, slug: str, pipeline: Pipeline, temporal_pids: list[int]
    ) -> dict[str, Any]:
        a = self.args
        print(f"  {pipeline.name}: latency ({a.latency_messages} messages)…", flush=True)
        self.warnings.take()
        lat_rec = self.recorder(slug, "lat")
        latency = await measure_latency(
            pipeline,
            self.watcher,
            lat_rec,
            count=a.latency_messages,
            warmup=a.warmup,
            size=a.size,
        )
        print(f"  {pipeline.name}: throughput ({a.agents} x {a.messages})…", flush=True)
        recs = [self.recorder(slug, f"a{i:02d}") for i in range(a.agents)]
        cpu = CpuMeter(
            pids={
                "temporal server": temporal_pids,
                "tmux server": [self.tmux.server_pid()],
                "panes (cat)": self.tmux.pane_pids(),
                "watcher": [self.watcher.pid],
            }
        )
        throughput = await measure_throughput(
            pipeline,
            self.watcher,
            recs,
            per_agent=a.messages,
            size=a.size,
            cpu=cpu,
            timeout_s=a.timeout,
        )
        for rec in [lat_rec, *recs]:
            self.tmux.kill_session(rec.key)
        result = {
            "name": pipeline.name,
            **latency,
            "throughput": throughput,
            "warnings": self.warnings.take(),
        }
        _print_phase(result)
        return result

    def contexts(self) -> dict[str, Callable[[], AbstractAsyncContextManager[Any]]]:
        return {
            "tmux": lambda: _plain(DirectTmux()),
            "bridge": lambda: _plain(Bridge()),
            "bare-activity": lambda: self._bare(local=False),
            "bare-local": lambda: self._bare(local=True),
            "mailbox": self._mailbox,
        }

    @asynccontextmanager
    async def _bare(self, *, local: bool) -> AsyncIterator[tuple[Pipeline, list[int]]]:
        slug = "bare-local" if local else "bare-activity"
        async with dev_server(self.workdir / f"temporal-{slug}.db") as server:
            pipeline = BareTemporal(server.client, local=local)
            async with pipeline.worker:
                yield pipeline, server.pids

    @asynccontextmanager
    async def _mailbox(self) -> AsyncIterator[tuple[Pipeline, list[int]]]:
        async with (
            dev_server(self.workdir / "temporal-mailbox.db") as server,
            Mailbox.running(server.client, self.workdir / "mailbox") as pipeline,
        ):
            yield pipeline, server.pids


@asynccontextmanager
async def _plain(pipeline: Pipeline) -> AsyncIterator[tuple[Pipeline, list[int]]]:
    yield pipeline, []


def _print_phase(result: dict[str, Any]) -> None:
    v, t = result["visible_ms"], result["throughput"]
    print(
        f"    p50 {v['p50']} ms, p99 {v['p99']} ms; {t['per_s']} msg/s; "
        f"verified={t['verified']} (lost {t['lost']}, duplicated {t['duplicated']}, "
        f"out of order {t['out_of_order_agents']} agents, send errors {t['send_errors']})",
        flush=True,
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    # Short path: Unix socket paths are limited to 108 bytes.
    workdir = Path(tempfile.mkdtemp(prefix="acbench-"))
    Runtime.set_default(bench_runtime(), error_if_already_set=False)
    os.environ["AGENTCOMMS_HOME"] = str(workdir / "home")  # never touch the user's ~/.agentcomms
    bench = Bench(args, workdir)
    results: dict[str, Any] = {
        "machine": machine_info(temporal_binary()),
        "parameters": {
            "agents": args.agents,
            "messages_per_agent": args.messages,
            "latency_messages": args.latency_messages,
            "warmup": args.warmup,
            "message_chars": args.size,
            "poll_ms": args.poll_ms,
            "submit_delay_ms": 0,
            "process_layout": "client, gateway and worker in the bench process; "
            "dev server (database file, headless), tmux server and watcher are separate",
        },
        "pipelines": {},
    }
    started = time.monotonic()
    bench.watcher = await Watcher.start(args.poll_ms / 1000)
    try:
        before = await bench.watcher.stats()
        delays = await bench.watcher.calibrate(workdir / "calibration.bytes")
        steady = (await bench.watcher.stats()).since(before)
        results["watcher"] = {
            "detection_delay_ms": summarize(delays),
            "poll_interval_ms": round(steady.poll_interval_ms, 3),
            "cpu_percent_of_one_core": round(steady.cpu_percent, 1),
        }
        print(f"watcher: {results['watcher']}", flush=True)
        contexts = bench.contexts()
        for slug in args.only or PIPELINES:
            async with contexts[slug]() as (pipeline, temporal_pids):
                results["pipelines"][slug] = await bench.phase(slug, pipeline, temporal_pids)
        if args.profile and "mailbox" in (args.only or PIPELINES):
            from bench.profile import profile_mailbox

            print("  profile: instrumented mailbox run…", flush=True)
            results["profile"] = await profile_mailbox(bench)
    finally:
        await bench.watcher.close()
        bench.tmux.kill_server()
        shutil.rmtree(workdir, ignore_errors=True)
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["duration_s"] = round(time.monotonic() - started, 1)
    results["aims"] = aims(results)
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_mailbox", description=__doc__)
    add = parser.add_argument
    add("--messages", type=int, default=40, help="messages per agent in the throughput run")
    add("--agents", type=int, default=20, help="agents (panes) in the throughput run")
    add("--latency-messages", type=int, default=300, help="messages sent one at a time")
    add("--warmup", type=int, default=10, help="latency warm-up messages, not counted")
    add("--size", type=int, default=64, help="characters per message")
    add("--poll-ms", type=float, default=1.0, help="the watcher's poll interval")
    add("--timeout", type=float, default=120, help="seconds to wait for a throughput run")
    add("--only", nargs="+", choices=PIPELINES, help="run only these pipelines")
    add("--no-profile", dest="profile", action="store_false", help="skip the profile run")
    add(
        "--projection-lock",
        action="store_true",
        help="in the profile, also hold the projection's write lock for 12 s (adds ~15 s)",
    )
    add("--out", type=Path, default=RESULTS, help="where results are written")
    add("--no-save", dest="save", action="store_false", help="print only")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = asyncio.run(run(args))
    report = markdown(results)
    print()
    print(report)
    if args.save:
        args.out.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
        path = args.out / f"mailbox-{stamp}.json"
        path.write_text(json.dumps(results, indent=2) + "\n")
        (args.out / "mailbox-latest.md").write_text(report)
        print(f"written: {path} and {args.out / 'mailbox-latest.md'}")
    failed = [slug for slug, r in results["pipelines"].items() if not r["throughput"]["verified"]]
    if failed:
        print(f"FAILED: messages lost, duplicated or out of order in {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
