"""Waiting for what a real process, pane or server does a moment later: poll, never sleep blind."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar, overload

T = TypeVar("T")


@overload
async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float = 20, interval: float = 0.05
) -> T: ...


@overload
async def eventually(
    probe: Callable[[], T | None], *, timeout: float = 20, interval: float = 0.05
) -> T: ...


async def eventually(
    probe: Callable[[], object], *, timeout: float = 20, interval: float = 0.05
) -> object:
    """Poll `probe` until it returns something truthy; fail with its last value at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s; last value: {value!r}")
        await asyncio.sleep(interval)


async def typed(out: Path, expected: bytes, *, timeout: float = 20) -> None:
    """The recorder pane's file holds exactly `expected`, once the program in the pane caught up:
    "delivered" means tmux took the keys; `cat` writes them to the file a moment later."""
    await eventually(lambda: len(out.read_bytes()) >= len(expected), timeout=timeout)
    assert await asyncio.to_thread(out.read_bytes) == expected
