"""Running a Starlette app on a local port inside the test's event loop, stoppable and restartable;
and what fakes of providers' HTTP APIs share."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Self

import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.routing import BaseRoute
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
    on the same port); or ``async with server:`` to serve for a block (a fixture's test)."""

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
        # Long polls in flight are cut off, as when a real server goes away: their connections
        # close now (uvicorn would leave them open, their clients waiting out a read timeout).
        self._server.force_exit = True
        for connection in list(self._server.server_state.connections):
            connection.transport.close()
        await self._task
        self._server = self._task = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


class FakeAPI:
    """A provider's HTTP API on a local port: ``server`` runs it, ``base_url`` reaches it, and
    ``fail_next(500, …)`` scripts the statuses its next requests fail with, in order."""

    def __init__(self, *routes: BaseRoute) -> None:
        self.server = LocalServer(Starlette(routes=list(routes)))
        self._failures: list[int] = []

    @property
    def base_url(self) -> str:
        return self.server.url

    def fail_next(self, *statuses: int) -> None:
        self._failures.extend(statuses)

    def _next_failure(self) -> int | None:
        """The status the next request fails with, if a test scripted one."""
        return self._failures.pop(0) if self._failures else None


async def upload(request: Request, *fields: str) -> tuple[bytes, dict[str, str]]:
    """A multipart request's ``file`` (empty when there is none) and its named fields, as text."""
    async with request.form() as form:  # closes the uploaded file's spool
        file = form.get("file")
        data = await file.read() if isinstance(file, UploadFile) else b""
        return data, {name: str(form.get(name)) for name in fields}
