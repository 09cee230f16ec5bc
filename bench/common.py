"""What the benchmarks share: the product's stack, a private tmux server, the arrival watcher,
percentiles, CPU accounting and the results files.

Every benchmark drives the product through its public entry points, as ``agentcomms up`` does:
``runtime.temporal_and_store`` (the embedded dev server on a database file, headless),
``workers.main.build_workers`` and ``gateway.service.Gateway``, all in the bench process, each
stack in a fresh ``AGENTCOMMS_HOME`` (your own ``~/.agentcomms`` is never touched).
"""

from __future__ import annotations

import asyncio
import cProfile
import datetime as dt
import inspect
import io
import json
import logging
import math
import os
import platform
import pstats
import re
import resource
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

from agentcomms.config import Config, ConsoleConfig, TemporalConfig, VoiceConfig
from agentcomms.runtime import Runtime as Stack
from agentcomms.runtime import temporal_and_store
from agentcomms.voice.warm import WARM_UP_TASK
from gateway.service import Gateway
from workers.main import build_workers

RESULTS = Path(__file__).resolve().parent / "results"
_TICK = os.sysconf("SC_CLK_TCK")


# ---- percentiles -------------------------------------------------------------------------------


def summarize(values_ms: list[float]) -> dict[str, float]:
    """n, p50, p90, p95, p99, max and mean of milliseconds (nearest-rank percentiles)."""
    if not values_ms:
        return {"n": 0}
    ordered = sorted(values_ms)

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]

    return {
        "n": len(ordered),
        "p50": round(rank(50), 2),
        "p90": round(rank(90), 2),
        "p95": round(rank(95), 2),
        "p99": round(rank(99), 2),
        "max": round(ordered[-1], 2),
        "mean": round(sum(ordered) / len(ordered), 2),
    }


# ---- the product's stack -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config_in(home: Path, voice: VoiceConfig | None = None) -> Config:
    """The default configuration, rooted in `home`, with the dev server on a free port."""
    os.environ["AGENTCOMMS_HOME"] = str(home)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    return Config(
        temporal=TemporalConfig(address=f"127.0.0.1:{free_port()}"),
        voice=voice or VoiceConfig(),
        console=ConsoleConfig(enabled=False),  # bench_console serves one on a port of its own
    )


@asynccontextmanager
async def temporal(
    home: Path,
    *,
    product: bool = True,
    voice: VoiceConfig | None = None,
    configure: Callable[[Config], Config] | None = None,
) -> AsyncIterator[Stack]:
    """A fresh home with its own embedded dev server; with `product`, the worker and gateway too;
    `configure` changes the default configuration first (e.g. a chat provider on its fake).

    The home holds the Temporal database, the projection, the gateway socket (``daemon.sock``)
    and the dev server's log. A Unix socket path is limited to 108 bytes: keep `home` short.
    """
    cfg = _config_in(home, voice)
    if configure is not None:
        cfg = configure(cfg)
    async with temporal_and_store(cfg, embed=True, headless=True) as rt, AsyncExitStack() as stack:
        if product:
            for worker in build_workers(rt.client, cfg, rt.store):
                await stack.enter_async_context(worker)
            gateway = Gateway(cfg, rt.client, rt.store)
            await gateway.start()
            stack.push_async_callback(gateway.close)
            await _warmed_up()
        yield rt


async def _warmed_up() -> None:
    """Wait for the worker's background warm-up of the speech providers (the local recognizer's
    model takes about half a second of CPU): figures are of a stack that has started, not of one
    still loading models beside the first messages."""
    for _ in range(100):  # the worker enters its warm-up once its run has begun
        warming = [t for t in asyncio.all_tasks() if t.get_name() == WARM_UP_TASK]
        if warming:
            await asyncio.gather(*warming)
            return
        await asyncio.sleep(0.01)


def server_pids(rt: Stack) -> list[int]:
    return [rt.dev_server.process.pid] if rt.dev_server else []


class WarningCounter(logging.Handler):
    """Counts the warnings logged (the core SDK's "Workflow task not found" among them) by kind,
    instead of printing them between the figures."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        # Ids and numbers differ in every record; the kind is what is counted.
        first = record.getMessage().split("\n", 1)[0].split(" {", 1)[0]
        kind = re.sub(r"[0-9a-f-]{8,}|\d+", "#", first)[:100]
        self.counts[f"{record.levelname} {kind}"] += 1

    def take(self) -> dict[str, int]:
        counts, self.counts = dict(self.counts), Counter()
        return counts


def count_warnings() -> WarningCounter:
    """Route the core SDK's log to Python logging, and count what is logged there."""
    Runtime.set_default(
        Runtime(
            telemetry=TelemetryConfig(
                logging=LoggingConfig(
                    filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                    forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
                )
            )
        ),
        error_if_already_set=False,
    )
    counter = WarningCounter()
    logging.getLogger().addHandler(counter)
    return counter


# ---- a private tmux server with recorder panes -------------------------------------------------


@dataclass(frozen=True)
class Pane:
    target: str
    socket: str


class Tmux:
    """A private tmux server on its own socket, without the user's configuration."""

    def __init__(self, socket_path: Path) -> None:
        self.socket = str(socket_path)
        self.run("-f", "/dev/null", "new-session", "-d", "-s", "keepalive", "sleep 100000")

    def run(self, *args: str) -> str:
        argv = ["tmux", "-S", self.socket, *args]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    def recorder(self, name: str, file: Path) -> Pane:
        """A pane that appends every byte typed into it to `file` (Enter arrives as CR)."""
        file.touch()
        command = f"stty raw -echo; exec cat >> {file}"
        self.run("new-session", "-d", "-s", name, "-x", "200", "-y", "50", command)
        target = f"{name}:0.0"
        # Text typed before `stty raw` would be cooked (CR made LF): wait for cat to run.
        deadline = time.monotonic() + 10
        while self.run("display-message", "-p", "-t", target, "#{pane_current_command}") != "cat\n":
            if time.monotonic() > deadline:
                raise RuntimeError(f"the recorder pane {target} did not start cat")
            time.sleep(0.005)
        return Pane(target=target, socket=self.socket)

    def server_pid(self) -> int:
        return int(self.run("display-message", "-p", "#{pid}"))

    def kill_session(self, name: str) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-session", "-t", name], check=False)

    def kill_server(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], check=False)


# ---- the arrival watcher -----------------------------------------------------------------------


def _poll_files(interval_s: float) -> None:
    """The watcher process: stdin takes ``KEY PATH`` lines; stdout gets ``KEY NS TEXT`` for each
    CR-terminated message appended to PATH, NS the monotonic clock (system-wide) at the poll."""
    import os
    import select
    import sys
    import time

    files: dict[str, tuple[int, list[bytes]]] = {}
    inbox = b""
    while True:
        if select.select([0], [], [], interval_s)[0]:
            data = os.read(0, 65536)
            if not data:
                return
            *lines, inbox = (inbox + data).split(b"\n")
            for line in lines:
                key, path = line.decode().split(" ", 1)
                files[key] = (os.open(path, os.O_RDONLY), [b""])
        out = []
        for key, (fd, partial) in files.items():
            while chunk := os.read(fd, 1 << 16):
                now = time.monotonic_ns()
                *done, partial[0] = (partial[0] + chunk).split(b"\r")
                out += [f"{key} {now} ".encode() + m.replace(b"\n", b" ") + b"\n" for m in done]
        if out:
            sys.stdout.buffer.write(b"".join(out))
            sys.stdout.buffer.flush()


class Watcher:
    """Timestamps each message as it lands in a recorder pane's file.

    A process of its own polls the files every millisecond, so polling costs neither the GIL nor
    the event loop of the process under test. Every latency includes up to one poll interval.
    """

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._arrivals: defaultdict[str, list[tuple[int, str]]] = defaultdict(list)
        self._changed: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, interval_s: float = 0.001) -> Watcher:
        source = inspect.getsource(_poll_files) + f"\n_poll_files({interval_s!r})\n"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", source, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            key, ns, text = line.decode("utf-8", "replace").rstrip("\n").split(" ", 2)
            self._arrivals[key].append((int(ns), text))
            self._changed[key].set()

    async def add(self, key: str, path: Path) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{key} {path}\n".encode())
        await self.proc.stdin.drain()

    def arrivals(self, key: str) -> list[tuple[int, str]]:
        return self._arrivals[key]

    async def wait_for(self, key: str, count: int, timeout_s: float) -> bool:
        """Wait until `key` has `count` arrivals; False at the timeout."""
        try:
            async with asyncio.timeout(timeout_s):
                while len(self._arrivals[key]) < count:
                    self._changed[key].clear()
                    await self._changed[key].wait()
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        self._reader.cancel()
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


# ---- CPU, memory, profile ----------------------------------------------------------------------


def process_cpu_s(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def cpu_seconds(others: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far: this process, its finished children (tmux clients), and `others`.
    Subtract two of these to get a window."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = {
        "bench process": own.ru_utime + own.ru_stime,
        "tmux clients": kids.ru_utime + kids.ru_stime,
    }
    for name, pids in others.items():
        used[name] = sum(process_cpu_s(pid) for pid in pids)
    return used


def rss_mb() -> float:
    """This process's resident memory (the worker, the gateway and the client live here)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


@contextmanager
def profiled(enabled: bool, top: int = 25) -> Iterator[None]:
    """With `enabled`, print the functions that took the most time inside the block (cProfile:
    the event loop's thread only, not the workflow threads or the core SDK)."""
    if not enabled:
        yield
        return
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(top)
        print(out.getvalue())


# ---- results -----------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    tmux = subprocess.run(["tmux", "-V"], capture_output=True, text=True, check=False).stdout
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "temporalio": version("temporalio"),
        "tmux": tmux.strip(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def latency_page(title: str, report: dict[str, Any], about: str, row_name: str) -> str:
    """A results page: the machine, what was measured, then one row of figures per result."""
    m = report["machine"]
    lines = [
        f"# {title}, {m['date']}",
        "",
        f"{m['cpus']} CPUs, Python {m['python']}, load average {m['load_average']} at start. "
        + about,
        "",
        f"| {row_name} | p50 ms | p99 ms | mean ms | max ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, s in report["results"].items():
        lines.append(f"| {name} | {s['p50']} | {s['p99']} | {s['mean']} | {s['max']} |")
    return "\n".join(lines) + "\n"


def write_results(name: str, results: dict[str, Any], markdown: str) -> None:
    """``results/<name>-latest.json`` and ``.md``: only the latest run is kept."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}-latest.json").write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / f"{name}-latest.md").write_text(markdown)
    print(f"written: {RESULTS / name}-latest.json and .md")
