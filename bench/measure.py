"""The two measurements every pipeline gets: one-at-a-time latency, and throughput across agents."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.pipeline import Pane
from bench.pipelines import Pipeline
from bench.system import CpuMeter, summarize
from bench.watch import Watcher


def message(prefix: str, index: int, size: int) -> str:
    """A message of exactly `size` characters (at least the prefix and index), unique per index."""
    head = f"{prefix}-{index:05d}-"
    return head + "x" * max(0, size - len(head))


@dataclass
class Recorder:
    """A recorder pane and its file, watched under `key`."""

    key: str
    pane: Pane
    file: Path


async def send_and_wait(
    pipeline: Pipeline, watcher: Watcher, rec: Recorder, text: str, timeout_s: float
) -> tuple[float, float]:
    """Send one message, wait until it is in the pane: (ms until accepted, ms until visible)."""
    seen = len(watcher.arrivals(rec.key))
    sent = time.monotonic_ns()
    await pipeline.send(rec.key, text)
    accepted = time.monotonic_ns()
    if not await watcher.wait_for(rec.key, seen + 1, timeout_s):
        raise AssertionError(f"{pipeline.name}: {text[:20]!r} not in the pane after {timeout_s} s")
    arrived, got = watcher.arrivals(rec.key)[seen]
    if got != text:
        raise AssertionError(f"{pipeline.name}: expected {text!r} in the pane, got {got!r}")
    return (accepted - sent) / 1e6, (arrived - sent) / 1e6


async def measure_latency(
    pipeline: Pipeline,
    watcher: Watcher,
    rec: Recorder,
    *,
    count: int,
    warmup: int,
    size: int,
    timeout_s: float = 30,
) -> dict[str, Any]:
    """Send `count` messages one at a time, each after the previous one is visible."""
    await watcher.add(rec.key, rec.file)
    await pipeline.add_agent(rec.key, rec.pane)
    for i in range(warmup):
        await send_and_wait(pipeline, watcher, rec, message("warm", i, size), timeout_s)
    accepted, visible = [], []
    for i in range(count):
        a, v = await send_and_wait(pipeline, watcher, rec, message("lat", i, size), timeout_s)
        accepted.append(a)
        visible.append(v)
    third = max(1, count // 3)
    return {
        "visible_ms": summarize(visible),
        "accepted_ms": summarize(accepted),
        # Does latency drift as the agent's history grows? p50 of each third of the run.
        "visible_p50_by_third_ms": [
            summarize(visible[i : i + third])["p50"] for i in range(0, third * 3, third)
        ],
    }


def verify(file: Path, offset: int, expected: list[str]) -> dict[str, Any]:
    """Compare what a pane recorded after `offset` with what was sent: lost, duplicated, order."""
    got = file.read_bytes()[offset:].decode("utf-8", "replace").split("\r")
    tail = got.pop()  # after the last CR: "" unless a message was cut off
    counts = Counter(got)
    return {
        "sent": len(expected),
        "arrived": len(got),
        "lost": len(set(expected) - counts.keys()),
        "duplicated": sum(n - 1 for n in counts.values() if n > 1),
        "unexpected": len(counts.keys() - set(expected)) + (1 if tail else 0),
        "in_order": got == expected,
    }


async def measure_throughput(
    pipeline: Pipeline,
    watcher: Watcher,
    recs: list[Recorder],
    *,
    per_agent: int,
    size: int,
    cpu: CpuMeter,
    timeout_s: float,
) -> dict[str, Any]:
    """Every agent's sender submits `per_agent` messages back to back, all agents at once."""
    for rec in recs:
        await watcher.add(rec.key, rec.file)
        await pipeline.add_agent(rec.key, rec.pane)
    # Warm up: one message each creates the workflows and runs every code path once.
    await asyncio.gather(*(pipeline.send(r.key, message("warm", 0, size)) for r in recs))
    for rec in recs:
        if not await watcher.wait_for(rec.key, 1, timeout_s):
            raise AssertionError(f"{pipeline.name}: warm-up message for {rec.key} never arrived")
    offsets = {r.key: r.file.stat().st_size for r in recs}
    before = {r.key: len(watcher.arrivals(r.key)) for r in recs}
    expected = {r.key: [message(r.key, i, size) for i in range(per_agent)] for r in recs}

    errors: list[str] = []

    async def sender(rec: Recorder) -> None:
        for text in expected[rec.key]:
            try:
                await pipeline.send(rec.key, text)
            except Exception as exc:  # counted and reported: an error reply is a finding too
                errors.append(f"{type(exc).__name__}: {exc}")

    cpu.start()
    started = time.monotonic_ns()
    await asyncio.gather(*(sender(r) for r in recs))
    accepted = time.monotonic_ns()
    arrived_all = all(
        await asyncio.gather(
            *(watcher.wait_for(r.key, before[r.key] + per_agent, timeout_s) for r in recs)
        )
    )
    finished = max(
        (watcher.arrivals(r.key)[-1][0] for r in recs if watcher.arrivals(r.key)),
        default=started,
    )
    used = cpu.stop()
    total = per_agent * len(recs)
    seconds = (finished - started) / 1e9
    checks = {r.key: verify(r.file, offsets[r.key], expected[r.key]) for r in recs}
    ok = (
        not errors
        and arrived_all
        and all(
            c["lost"] == 0 and c["duplicated"] == 0 and c["unexpected"] == 0 and c["in_order"]
            for c in checks.values()
        )
    )
    return {
        "agents": len(recs),
        "messages": total,
        "seconds": round(seconds, 3),
        "per_s": round(total / seconds, 1) if seconds > 0 else None,
        "accepted_s": round((accepted - started) / 1e9, 3),
        "verified": ok,
        "lost": sum(c["lost"] for c in checks.values()),
        "duplicated": sum(c["duplicated"] for c in checks.values()),
        "out_of_order_agents": sum(1 for c in checks.values() if not c["in_order"]),
        "send_errors": len(errors),
        "send_error_kinds": dict(Counter(errors)),
        "failures": {k: c for k, c in checks.items() if not c["in_order"]},
        "cpu_s": used,
        "cpu_ms_per_message": {
            name: round(value * 1000 / total, 3) for name, value in used.items() if name != "wall"
        },
        "bench_process_threads_cpu_ms_per_message": {
            name: round(value * 1000 / total, 3) for name, value in cpu.threads.items()
        },
    }
