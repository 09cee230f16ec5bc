"""JSON-RPC 2.0 over a child process's stdio, one JSON object per line: the wire ACP runs on.

Both sides ask: the client sends requests (``session/prompt``) and notifications
(``session/cancel``); the agent sends notifications (``session/update``) and requests of its own
(``session/request_permission``), answered by the handler the connection was given. A request
whose answer is still awaited when the process ends fails with :class:`ConnectionLost`, so
nobody waits forever on an agent that died mid-turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

# An agent's line may carry a whole file it read; past this it is a broken agent, not a message.
LINE_LIMIT = 16 * 1024 * 1024

RequestHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]
NotificationHandler = Callable[[str, dict[str, Any]], None]


class RpcFailed(Exception):
    """The other side answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method}: {message} (code {code})")
        self.code = code


class ConnectionLost(Exception):
    """The other side's stream ended (the process exited) before it answered."""


class MethodNotFound(Exception):
    """Raised by a request handler for a method it does not serve."""


class Connection:
    """One JSON-RPC peer over a reader and a writer."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_request = on_request
        self._on_notification = on_notification
        self._next_id = 0
        self._waiting: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._handlers: set[asyncio.Task[None]] = set()
        self._closed = False
        self._reading = asyncio.create_task(self._read())

    @property
    def closed(self) -> bool:
        return self._closed

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        if self._closed:
            raise ConnectionLost(f"{method}: the agent's stdio is closed")
        self._next_id += 1
        request_id = self._next_id
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (method, answer)
        try:
            await self._send(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            )
            return await answer
        finally:
            self._waiting.pop(request_id, None)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if not self._closed:
            await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def wait_closed(self) -> None:
        await asyncio.shield(self._reading)

    async def close(self) -> None:
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        for task in list(self._handlers):
            task.cancel()
        self._lost("the connection was closed")

    async def _send(self, message: dict[str, Any]) -> None:
        try:
            self._writer.write(json.dumps(message).encode() + b"\n")
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            self._lost(f"writing to the agent failed: {exc}")
            raise ConnectionLost(str(exc)) from exc

    async def _read(self) -> None:
        try:
            while line := await self._reader.readline():
                if len(line) > LINE_LIMIT:
                    log.warning("dropped an agent's line of %d bytes", len(line))
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    # Agents log to stdout now and then; a line that is not JSON is not ours.
                    log.debug("not JSON from the agent: %.200r", line)
                    continue
                if isinstance(message, dict):
                    self._dispatch(message)
        except (ConnectionError, ValueError) as exc:  # ValueError: a line past the limit
            log.warning("reading the agent's stdout failed: %s", exc)
        finally:
            self._lost("the agent's process ended")

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str):
            params = message.get("params")
            params = params if isinstance(params, dict) else {}
            if "id" in message:
                task = asyncio.create_task(self._answer(message["id"], method, params))
                self._handlers.add(task)
                task.add_done_callback(self._handlers.discard)
            else:
                self._on_notification(method, params)
            return
        waiting = self._waiting.get(message.get("id"))  # type: ignore[arg-type]
        if waiting is None:
            return
        name, answer = waiting
        if answer.done():
            return
        if isinstance(error := message.get("error"), dict):
            code = error.get("code")
            answer.set_exception(
                RpcFailed(name, code if isinstance(code, int) else 0, str(error.get("message")))
            )
        else:
            answer.set_result(message.get("result"))

    async def _answer(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        try:
            reply["result"] = await self._on_request(method, params)
        except MethodNotFound:
            reply["error"] = {"code": -32601, "message": f"method not found: {method}"}
        except Exception as exc:  # the agent must get an answer, whatever went wrong here
            log.exception("answering the agent's %s failed", method)
            reply["error"] = {"code": -32603, "message": str(exc)}
        with contextlib.suppress(ConnectionLost):
            await self._send(reply)

    def _lost(self, why: str) -> None:
        self._closed = True
        for method, answer in list(self._waiting.values()):
            if not answer.done():
                answer.set_exception(ConnectionLost(f"{method}: {why}"))
