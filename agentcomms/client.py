"""A client of the gateway socket, for the CLI and the MCP server."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

from agentcomms.errors import GatewayError, GatewayUnavailable


class GatewayClient:
    """One persistent connection; requests may be issued concurrently.

    With ``caller``, every request acts for that agent, and the gateway serves only what is
    that agent's own (its mailbox, its chats, its calls).
    """

    def __init__(self, path: Path, *, caller: str | None = None) -> None:
        self.path = path
        self.caller = caller
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reading: asyncio.Task[None] | None = None

    async def __aenter__(self) -> GatewayClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        try:
            self._reader, self._writer = await asyncio.open_unix_connection(
                str(self.path), limit=64 * 1024 * 1024
            )
        except PermissionError as exc:
            raise GatewayUnavailable(
                f"The agentcomms gateway's socket {self.path} is not yours (permission denied): "
                "only the user who runs the gateway reaches it. An agent running as a user of "
                "its own reaches agentcomms through its hooks' door and its MCP tools over HTTP."
            ) from exc
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise GatewayUnavailable(
                f"The agentcomms gateway is not running (no answer at {self.path}). "
                "Start it with `agentcomms up`."
            ) from exc
        self._reading = asyncio.create_task(self._read_replies())

    async def close(self) -> None:
        if self._reading:
            self._reading.cancel()
        if self._writer:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except ConnectionError:
                pass

    @property
    def open(self) -> bool:
        """Whether the connection is up: the gateway has not closed it (a restart) since."""
        return self._reading is not None and not self._reading.done()

    async def call(self, method: str, **params: Any) -> Any:
        return await self.call_as(self.caller, method, **params)

    async def call_as(self, caller: str | None, method: str, **params: Any) -> Any:
        """`method` acting for agent `caller` (None: as the connection's user)."""
        if self._writer is None:
            await self.connect()
        assert self._writer is not None
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        request: dict[str, Any] = {"id": request_id, "method": method, "params": params}
        if caller is not None:
            request["caller"] = caller
        line = json.dumps(request) + "\n"
        self._writer.write(line.encode())
        await self._writer.drain()
        reply = await future
        if "error" in reply:
            raise GatewayError(reply["error"]["code"], reply["error"]["message"])
        return reply["result"]

    async def _read_replies(self) -> None:
        assert self._reader is not None
        try:
            while line := await self._reader.readline():
                reply = json.loads(line)
                future = self._waiting.pop(reply.get("id"), None)
                if future is not None and not future.done():
                    future.set_result(reply)
        finally:
            lost = GatewayUnavailable(f"The gateway at {self.path} closed the connection.")
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(lost)
            self._waiting.clear()


async def call(path: Path, method: str, *, caller: str | None = None, **params: Any) -> Any:
    """One request on a fresh connection (acting for agent ``caller``, when given)."""
    async with GatewayClient(path, caller=caller) as client:
        return await client.call(method, **params)
