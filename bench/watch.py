"""Arrival detection: a separate process polls the recorder panes' files and timestamps each message.

A recorder pane runs ``stty raw -echo; exec cat >> FILE``, so every byte typed into it lands in FILE
and the Enter key arrives as CR. The watcher keeps each file open, reads whatever was appended
(``os.read`` until empty: one syscall per idle file per poll), and reports each CR-terminated
message with ``time.monotonic_ns()`` at the poll that saw it. CLOCK_MONOTONIC is system-wide, so
the bench process compares it with its own send times.

It is a process of its own so that polling costs neither the GIL nor the event loop of the process
under test; the poll's own overhead (detection delay, CPU) is measured by :meth:`Watcher.calibrate`.

Protocol, one line each way. In: ``add KEY PATH`` (answered ``+ KEY``), ``stats``, ``quit``.
Out: ``KEY<TAB>NS<TAB>TEXT`` per message (a C-c byte as ``KEY!<TAB>NS<TAB>^C``, at once, and
taken out of the text), ``= CPU_NS LOOPS WALL_NS`` for stats.
"""

from __future__ import annotations

import asyncio
import os
import select
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent


def _serve(interval_s: float) -> None:
    files: dict[str, tuple[int, list[bytes]]] = {}  # key -> (fd, [partial message])
    inbox = b""
    loops = 0
    started = time.monotonic_ns()
    out = sys.stdout.buffer
    while True:
        # The select on stdin is the poll's sleep, and commands arrive through it.
        readable, _, _ = select.select([0], [], [], interval_s)
        if readable:
            data = os.read(0, 65536)
            if not data:
                return  # the bench process is gone
            inbox += data
            while b"\n" in inbox:
                line, inbox = inbox.split(b"\n", 1)
                words = line.decode().split(" ", 2)
                if words[0] == "add":
                    files[words[1]] = (os.open(words[2], os.O_RDONLY), [b""])
                    out.write(f"+ {words[1]}\n".encode())
                elif words[0] == "stats":
                    wall = time.monotonic_ns() - started
                    out.write(f"= {time.process_time_ns()} {loops} {wall}\n".encode())
                elif words[0] == "quit":
                    out.flush()
                    return
                out.flush()
        now = 0
        lines: list[bytes] = []
        for key, (fd, partial) in files.items():
            while chunk := os.read(fd, 1 << 16):
                now = now or time.monotonic_ns()
                if b"\x03" in chunk:  # an interrupt (C-c): reported at once, as key "KEY!"
                    lines.append(f"{key}!\t{now}\t^C\n".encode())
                    chunk = chunk.replace(b"\x03", b"")
                *done, partial[0] = (partial[0] + chunk).split(b"\r")
                for message in done:
                    text = message.decode("utf-8", "replace").replace("\t", " ")
                    lines.append(f"{key}\t{now}\t{text}\n".encode())
        if lines:
            out.write(b"".join(lines))
            out.flush()
        loops += 1


@dataclass
class WatcherStats:
    cpu_s: float
    loops: int
    wall_s: float

    def since(self, earlier: WatcherStats) -> WatcherStats:
        """The figures of the window between `earlier` and these."""
        return WatcherStats(
            cpu_s=self.cpu_s - earlier.cpu_s,
            loops=self.loops - earlier.loops,
            wall_s=self.wall_s - earlier.wall_s,
        )

    @property
    def poll_interval_ms(self) -> float:
        return self.wall_s / max(self.loops, 1) * 1000

    @property
    def cpu_percent(self) -> float:
        return self.cpu_s / self.wall_s * 100 if self.wall_s else 0.0


@dataclass
class _Key:
    arrivals: list[tuple[int, str]] = field(default_factory=list)  # (monotonic ns, text)
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class Watcher:
    """The bench side: start the poller, watch files, await arrivals."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self._keys: defaultdict[str, _Key] = defaultdict(_Key)
        self._acks: asyncio.Queue[str] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read())

    @property
    def pid(self) -> int:
        return self._proc.pid

    @classmethod
    async def start(cls, interval_s: float = 0.001) -> Watcher:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            f"from bench.watch import _serve; _serve({interval_s!r})",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=_REPO,
        )
        return cls(proc)

    async def _command(self, line: str) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(line.encode() + b"\n")
        await self._proc.stdin.drain()

    async def _read(self) -> None:
        assert self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            text = line.decode().rstrip("\n")
            if text.startswith(("+ ", "= ")):
                await self._acks.put(text)
                continue
            key, ns, message = text.split("\t", 2)
            entry = self._keys[key]
            entry.arrivals.append((int(ns), message))
            entry.changed.set()

    async def add(self, key: str, path: Path) -> None:
        await self._command(f"add {key} {path}")
        assert await asyncio.wait_for(self._acks.get(), 10) == f"+ {key}"

    def arrivals(self, key: str) -> list[tuple[int, str]]:
        return self._keys[key].arrivals

    async def wait_for(self, key: str, count: int, timeout_s: float) -> bool:
        """Wait until `key` has `count` arrivals; False at the timeout."""
        entry = self._keys[key]
        try:
            async with asyncio.timeout(timeout_s):
                while len(entry.arrivals) < count:
                    entry.changed.clear()
                    await entry.changed.wait()
        except TimeoutError:
            return False
        return True

    async def stats(self) -> WatcherStats:
        await self._command("stats")
        _, cpu, loops, wall = (await asyncio.wait_for(self._acks.get(), 10)).split()
        return WatcherStats(cpu_s=int(cpu) / 1e9, loops=int(loops), wall_s=int(wall) / 1e9)

    async def calibrate(self, path: Path, count: int = 200) -> list[float]:
        """Detection delays (ms) of `count` writes made here to a watched file: the poll's overhead."""
        key = "calibration"
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        await self.add(key, path)
        delays = []
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            for i in range(count):
                before = len(self.arrivals(key))
                sent = time.monotonic_ns()
                os.write(fd, f"cal-{i}\r".encode())
                assert await self.wait_for(key, before + 1, 5), "the watcher missed a write"
                delays.append((self.arrivals(key)[before][0] - sent) / 1e6)
                # Off the poll's phase: a real message arrives at any moment of the interval.
                await asyncio.sleep(0.0005 + (i % 7) * 0.00017)
        finally:
            os.close(fd)
        return delays

    async def close(self) -> None:
        if self._proc.returncode is None:
            try:
                await self._command("quit")
                await asyncio.wait_for(self._proc.wait(), 5)
            except (ConnectionError, TimeoutError):
                self._proc.kill()
                await self._proc.wait()
        self._reader.cancel()
