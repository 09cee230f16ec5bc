"""The gateway's Unix socket: newline-delimited JSON, persistent connections, many clients.

Bad input (broken JSON, a huge line, an unknown method, wrong types) gets an error reply; neither
the connection nor the gateway dies of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentcomms.errors import AgentcommsError, GatewayAlreadyRunning, RpcError
from gateway.socket.caller import Caller, Peer
from gateway.socket.protocol import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MAX_LINE_BYTES,
    error_line,
    load_request,
    parse_request,
    request_id,
    result_line,
)

log = logging.getLogger(__name__)
# How long a closing connection waits for its cancelled requests to end.
REQUESTS_END_S = 2.0

# (method, params, caller): who asks is the agent the request acts for, if any, and the
# process the kernel says connected.
Dispatch = Callable[[str, dict[str, Any], Caller], Awaitable[Any]]


def socket_is_live(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True


class SocketServer:
    def __init__(self, path: Path, dispatch: Dispatch, *, mode: int = 0o600) -> None:
        """``mode``: the socket's; owner-only but for the hooks' own door, which other users'
        agents open (and which admits only processes in an agent's pane)."""
        self.path = path
        self._dispatch = dispatch
        self._mode = mode
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._closing = False

    async def start(self) -> None:
        self._closing = False
        if self.path.exists() or self.path.is_symlink():
            if socket_is_live(self.path):
                raise GatewayAlreadyRunning(
                    f"A gateway is already running on {self.path}; stop it first "
                    "(or point server.socket_path elsewhere)."
                )
            self.path.unlink()  # stale: left by a gateway that died
        # A folder made for a socket others open must let them pass (not list).
        folder = 0o711 if self._mode & 0o066 else 0o700
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=folder)
        # Create the socket with its mode from the first instant (no window with looser modes).
        old_umask = os.umask(0o777 ^ self._mode)
        try:
            self._server = await asyncio.start_unix_server(
                self._serve_connection, path=str(self.path), limit=MAX_LINE_BYTES
            )
        finally:
            os.umask(old_umask)
        os.chmod(self.path, self._mode)

    async def close(self) -> None:
        if self._server is not None:
            # A connection accepted just before, whose task has not begun, ends as it begins:
            # served, it would stay open past the gateway (until the garbage collector's
            # ResourceWarning, in whatever test runs then).
            self._closing = True
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            self._server = None

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if self._closing:
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        write_lock = asyncio.Lock()
        pending: set[asyncio.Task[None]] = set()
        # Read once: the kernel's record of who connected, which no request can change.
        peer = Peer.of(writer.get_extra_info("socket"))

        async def reply(data: bytes) -> None:
            async with write_lock:
                writer.write(data)
                await writer.drain()

        try:
            async for line in _lines(reader):
                if line is None:
                    await reply(
                        error_line(None, INVALID_REQUEST, f"request over {MAX_LINE_BYTES} bytes")
                    )
                    continue
                if not line.strip():
                    continue
                # Requests on one connection run concurrently (a `send --wait` must not block a
                # `ping`); each reply carries its request's id.
                request_task = asyncio.create_task(self._handle(line, peer, reply))
                pending.add(request_task)
                request_task.add_done_callback(pending.discard)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # The gateway is closing. Ending quietly: asyncio logs a cancelled connection task
            # as an error, and nothing is wrong.
            pass
        finally:
            requests = list(pending)
            for request_task in requests:
                request_task.cancel()
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            # Waited for, briefly: a request still reading the projection when the gateway
            # closes its store would leave that connection behind, never closed.
            if requests:
                await asyncio.wait(requests, timeout=REQUESTS_END_S)

    async def _handle(
        self, line: bytes, peer: Peer | None, reply: Callable[[bytes], Awaitable[None]]
    ) -> None:
        answer_to: int | str | None = None
        try:
            loaded = load_request(line)
            answer_to = request_id(loaded)
            request = parse_request(loaded)
            caller = Caller(agent=request.caller, peer=peer)
            result = await self._dispatch(request.method, request.params, caller)
            data = result_line(answer_to, result)
        except RpcError as exc:
            data = error_line(answer_to, exc.code, exc.message)
        except AgentcommsError as exc:
            data = error_line(answer_to, INTERNAL_ERROR, str(exc))
        except Exception as exc:
            log.exception("internal error")
            data = error_line(answer_to, INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
        with contextlib.suppress(ConnectionError):
            await reply(data)


async def _lines(reader: asyncio.StreamReader) -> Any:
    """Yield each line; yield None for a line over the limit (after skipping the rest of it)."""
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                yield exc.partial
            return
        except asyncio.LimitOverrunError as exc:
            await _skip_line(reader, exc.consumed)
            yield None
            continue
        yield line


async def _skip_line(reader: asyncio.StreamReader, consumed: int) -> None:
    """Discard an oversized line without holding it in memory."""
    await reader.readexactly(consumed)
    while True:
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)
        except asyncio.IncompleteReadError:
            return
