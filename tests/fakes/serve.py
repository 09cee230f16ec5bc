"""Running a Starlette app on a local port inside the test's event loop, stoppable and restartable."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The test process owns its signals; a fake server must not take Ctrl-C.
        yield


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """``await start()``, ``await stop()`` (the provider is down), ``await start()`` again (back,
    on the same port)."""

    def __init__(self, app: ASGIApp, port: int | None = None) -> None:
        self.app = app
        self.port = port or free_port()
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises why it could not start
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        # Long polls in flight are cut off, as when a real server goes away.
        self._server.force_exit = True
        await self._task
        self._server = self._task = None
