"""Percentiles, per-process CPU accounting from /proc, and the machine's description."""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import resource
import subprocess
import threading
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def summarize(values_ms: list[float]) -> dict[str, float]:
    """n, p50, p95, p99, max and mean of a list of milliseconds (nearest-rank percentiles)."""
    if not values_ms:
        return {"n": 0}
    ordered = sorted(values_ms)

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]

    return {
        "n": len(ordered),
        "p50": round(rank(50), 2),
        "p95": round(rank(95), 2),
        "p99": round(rank(99), 2),
        "max": round(ordered[-1], 2),
        "mean": round(sum(ordered) / len(ordered), 2),
    }


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def children_of(pid: int, name: str) -> list[int]:
    """Pids of `pid`'s live child processes whose command name is `name`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == pid and comm == name:
            found.append(int(entry.name))
    return found


def _system_busy_s() -> float:
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / _TICK


@dataclass
class CpuMeter:
    """CPU seconds by component over a window: this process, its reaped children, named pids."""

    pids: dict[str, list[int]] = field(default_factory=dict)
    _start: dict[str, float] = field(default_factory=dict)
    _wall: float = 0.0
    _threads: ThreadCpu = field(default_factory=lambda: ThreadCpu())
    threads: dict[str, float] = field(default_factory=dict)  # the bench process's, after stop()

    def _sample(self) -> dict[str, float]:
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        sample = {
            "bench process": own.ru_utime + own.ru_stime,
            "tmux clients": kids.ru_utime + kids.ru_stime,
        }
        for name, pids in self.pids.items():
            sample[name] = sum(proc_cpu_s(pid) for pid in pids)
        sample["whole machine"] = _system_busy_s()
        return sample

    def start(self) -> None:
        self._threads.start()
        self._start = self._sample()
        self._wall = _now()

    def stop(self) -> dict[str, float]:
        """CPU seconds per component since start; 'other processes' is the machine's rest."""
        end = self._sample()
        self.threads = self._threads.stop()
        used = {name: end[name] - self._start.get(name, 0.0) for name in end}
        machine = used.pop("whole machine")
        used["other processes"] = max(0.0, machine - sum(used.values()))
        used["wall"] = _now() - self._wall
        return {name: round(value, 3) for name, value in used.items()}


def _now() -> float:
    return dt.datetime.now().timestamp()


def _command_output(*argv: str) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout.strip()
    except OSError as exc:
        return f"unavailable ({exc})"


def machine_info(temporal: Path) -> dict[str, object]:
    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu": cpu_model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "temporalio": version("temporalio"),
        "tmux": _command_output("tmux", "-V"),
        "temporal_cli": _command_output(str(temporal), "--version"),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def _thread_kind(name: str) -> str:
    if name == "MainThread":
        return "event loop thread (gateway, activities, SQLAlchemy, subprocess I/O)"
    if name.startswith("temporal_workflow"):
        return "workflow threads (activations in the sandbox)"
    if "_connection_worker_thread" in name:
        return "aiosqlite threads (SQLite itself)"
    if name.startswith("asyncio-waitpid"):
        return "asyncio child-watcher threads (one per tmux client)"
    if name.startswith("Dummy"):
        # A thread Python did not start that called into Python: the core SDK's, forwarding logs.
        return "Temporal core SDK threads (Rust)"
    return f"other Python threads ({name.split(' ')[0]})"


class ThreadCpu:
    """CPU seconds of this process's threads by kind, over a window.

    Python threads are named by ``threading``; the rest (the Temporal core SDK's Rust threads) are
    not. Threads that exit inside the window (a pooled connection closed, a child watcher done)
    take their CPU with them; it is reported as such.
    """

    def _sample(self) -> tuple[dict[int, tuple[str, float]], float]:
        names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        threads = {}
        for task in Path("/proc/self/task").iterdir():
            tid = int(task.name)
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            cpu = (int(fields[11]) + int(fields[12])) / _TICK
            threads[tid] = (names.get(tid, "Dummy (not a Python thread)"), cpu)
        own = resource.getrusage(resource.RUSAGE_SELF)
        return threads, own.ru_utime + own.ru_stime

    def start(self) -> None:
        self._start, self._total = self._sample()

    def stop(self) -> dict[str, float]:
        end, total = self._sample()
        kinds: dict[str, float] = {}
        for tid, (name, cpu) in end.items():
            kind = _thread_kind(name)
            before = self._start.get(tid, (name, 0.0))[1]
            kinds[kind] = kinds.get(kind, 0.0) + cpu - before
        kinds["threads that exited in the window"] = max(
            0.0, (total - self._total) - sum(kinds.values())
        )
        return {kind: round(value, 3) for kind, value in kinds.items()}
