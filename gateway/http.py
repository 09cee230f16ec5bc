"""The gateway's HTTP listener for provider webhooks (Starlette on uvicorn).

It listens on ``server.http_host:server.http_port`` and only when an enabled provider receives
by webhook; each receiver brings its routes. Providers reach it at ``server.public_url`` (a
tunnel or a proxy), and that URL, not the local one, is what webhook signatures are checked
against.

Every request is checked first (``agentcomms.http_guard``): its Host must be this listener's
(the bound address, ``localhost``, ``server.public_url``'s host, or one of
``server.allowed_hosts``), a browser's ``Origin`` must
be its own, and a body may not pass ``MAX_WEBHOOK_BODY``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware

from agentcomms.errors import ListenerUnavailable
from agentcomms.http_guard import MAX_WEBHOOK_BODY, Doorman, Guard

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # `agentcomms up` owns Ctrl-C and SIGTERM and stops the listener itself, in order.
        yield


class WebhookServer:
    def __init__(
        self,
        host: str,
        port: int,
        routes: list[Any],
        *,
        public_url: str | None = None,
        names: list[str] | None = None,
        what: str = "webhooks",
        settings: str = "server.http_host / server.http_port",
        middleware: Sequence[Middleware] = (),
    ) -> None:
        self.host = host
        self.what = what
        self._settings = settings
        self.port = port
        self.doorman = Doorman(host, port, public_url=public_url, names=names or [])
        guard = Middleware(Guard, doorman=self.doorman, max_body=MAX_WEBHOOK_BODY)
        self.app = Starlette(routes=routes, middleware=[guard, *middleware])
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        from agentcomms.address import port_problem

        problem = await asyncio.to_thread(port_problem, self.host, self.port)
        if problem is not None:
            raise ListenerUnavailable(
                f"{self.what} cannot listen on {self.host}:{self.port} ({problem}): set "
                f"{self._settings}"
            )
        config = uvicorn.Config(
            self.app,
            host=self.host,
            port=self.port,
            lifespan="off",
            log_level="warning",
            access_log=False,  # a webhook URL may carry a provider's token
            proxy_headers=False,  # signatures are checked against server.public_url instead
            # A page's open event stream ends when the gateway closes, and nothing waits longer.
            timeout_graceful_shutdown=3,
        )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(), name=self.what)
        while not self._server.started:
            if self._task.done():
                self._task = None
                raise ListenerUnavailable(
                    f"{self.what} cannot listen on {self.host}:{self.port} (in use, or not "
                    f"an address of this machine): set {self._settings}"
                )
            await asyncio.sleep(0.01)
        if self.port == 0:  # tests: the port the system chose
            self.port = self.doorman.port = self._server.servers[0].sockets[0].getsockname()[1]
        log.info("%s on http://%s:%s", self.what, self.host, self.port)

    async def close(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        await self._task
        self._server = self._task = None
