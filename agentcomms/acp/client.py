"""One ACP agent process, from agentcomms' side: start it, open or load a session, prompt it,
read its turn, answer its permission requests, cancel a turn, stop it.

ACP (the Agent Client Protocol) is JSON-RPC over the agent's stdio (:mod:`.rpc`). agentcomms
offers the agent no file system and no terminal of the client's: the agent works in its own
folder with its own tools, and asks before it uses one where its settings say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentcomms.acp.rpc import Connection, MethodNotFound

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
# How long an agent gets to answer `initialize` and to open or load a session (Node agents
# take a few seconds to start on a busy machine).
START_TIMEOUT_S = 60.0
# How long `stop` waits after SIGTERM before SIGKILL.
STOP_GRACE_S = 5.0


@dataclass(frozen=True)
class PermissionOption:
    """One of the answers the agent offers: `allow_once`, `allow_always`, `reject_once`…"""

    option_id: str
    name: str
    kind: str


@dataclass(frozen=True)
class PermissionAsk:
    """The agent's `session/request_permission`: the tool call it wants to make, its options."""

    session_id: str
    tool_call: dict[str, Any]
    options: tuple[PermissionOption, ...]

    @property
    def title(self) -> str:
        title = self.tool_call.get("title")
        return title if isinstance(title, str) and title else "a tool call"


@dataclass(frozen=True)
class Update:
    """One `session/update` of a turn: a chunk of the agent's reply, a tool call, a plan…"""

    session_id: str
    kind: str  # ACP's `sessionUpdate`: agent_message_chunk, tool_call, tool_call_update, plan…
    text: str | None = None  # the chunk's text, for message and thought chunks
    raw: dict[str, Any] = field(default_factory=dict)


UpdateHandler = Callable[[Update], None]
# The chosen option's id, or None to answer "cancelled".
PermissionHandler = Callable[[PermissionAsk], Awaitable[str | None]]


class AgentFailedToStart(Exception):
    """The agent's command could not be run, or it ended before it answered `initialize`."""


class AcpProcess:
    """A started ACP agent and its connection."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        connection: Connection,
        agent_info: dict[str, Any],
    ) -> None:
        self._process = process
        self._connection = connection
        self.agent_info = agent_info

    @classmethod
    async def start(
        cls,
        command: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        on_update: UpdateHandler,
        on_permission: PermissionHandler,
    ) -> AcpProcess:
        """Start `command` in `cwd` and initialize it."""
        if not command:
            raise AgentFailedToStart("no command to start the agent with")
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                cwd=cwd,
                env={**os.environ, **(env or {})},
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                limit=16 * 1024 * 1024,
                start_new_session=True,  # stopped as a group: adapters start the agent below them
            )
        except OSError as exc:
            raise AgentFailedToStart(f"could not run {command[0]!r} in {cwd}: {exc}") from exc
        assert process.stdin is not None and process.stdout is not None

        async def on_request(method: str, params: dict[str, Any]) -> Any:
            if method != "session/request_permission":
                raise MethodNotFound(method)
            chosen = await on_permission(_permission_ask(params))
            if chosen is None:
                return {"outcome": {"outcome": "cancelled"}}
            return {"outcome": {"outcome": "selected", "optionId": chosen}}

        def on_notification(method: str, params: dict[str, Any]) -> None:
            if method == "session/update" and isinstance(update := params.get("update"), dict):
                on_update(_update(params, update))

        connection = Connection(
            process.stdout,
            process.stdin,
            on_request=on_request,
            on_notification=on_notification,
        )
        agent = cls(process, connection, {})
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                agent.agent_info = (
                    await connection.request(
                        "initialize",
                        {
                            "protocolVersion": PROTOCOL_VERSION,
                            "clientCapabilities": {
                                "fs": {"readTextFile": False, "writeTextFile": False},
                                "terminal": False,
                            },
                        },
                    )
                    or {}
                )
        except asyncio.CancelledError:
            await asyncio.shield(agent.stop())  # no agent is left running half started
            raise
        except Exception as exc:
            await agent.stop()
            raise AgentFailedToStart(
                f"{command[0]} did not answer ACP's initialize: {exc or type(exc).__name__}"
            ) from exc
        return agent

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._process.returncode is None and not self._connection.closed

    @property
    def can_load(self) -> bool:
        capabilities = self.agent_info.get("agentCapabilities")
        return isinstance(capabilities, dict) and capabilities.get("loadSession") is True

    @property
    def takes_images(self) -> bool:
        """Whether the agent said in `initialize` that a prompt may hold image blocks."""
        capabilities = self.agent_info.get("agentCapabilities")
        prompt = capabilities.get("promptCapabilities") if isinstance(capabilities, dict) else None
        return isinstance(prompt, dict) and prompt.get("image") is True

    async def new_session(self, cwd: Path) -> str:
        async with asyncio.timeout(START_TIMEOUT_S):
            result = await self._connection.request(
                "session/new", {"cwd": str(cwd), "mcpServers": []}
            )
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session_id, str) or not session_id:
            raise AgentFailedToStart(f"session/new answered no sessionId: {result!r}")
        return session_id

    async def load_session(self, session_id: str, cwd: Path) -> None:
        """Load an earlier session (the agent replays it as updates); raises when it cannot."""
        async with asyncio.timeout(START_TIMEOUT_S):
            await self._connection.request(
                "session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
            )

    async def prompt(self, session_id: str, blocks: list[dict[str, Any]]) -> str:
        """Run one turn; its stop reason (`end_turn`, `cancelled`…) once it ends."""
        result = await self._connection.request(
            "session/prompt", {"sessionId": session_id, "prompt": blocks}
        )
        reason = result.get("stopReason") if isinstance(result, dict) else None
        return reason if isinstance(reason, str) else "end_turn"

    async def cancel(self, session_id: str) -> None:
        await self._connection.notify("session/cancel", {"sessionId": session_id})

    async def wait(self) -> int:
        """Until the process ends; its exit code."""
        await self._connection.wait_closed()
        return await self._process.wait()

    async def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """End the agent: close its stdin (ACP's way to say goodbye), then SIGTERM, SIGKILL."""
        if self._process.returncode is None:
            with contextlib.suppress(OSError, RuntimeError):
                assert self._process.stdin is not None
                self._process.stdin.close()
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    async with asyncio.timeout(grace_s):
                        await self._process.wait()
                    break
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self._process.pid, sig)
            await self._process.wait()
        await self._connection.close()


def _permission_ask(params: dict[str, Any]) -> PermissionAsk:
    options = []
    for option in params.get("options") or []:
        if isinstance(option, dict) and isinstance(option.get("optionId"), str):
            name = option.get("name")
            options.append(
                PermissionOption(
                    option_id=option["optionId"],
                    name=name if isinstance(name, str) else option["optionId"],
                    kind=str(option.get("kind") or ""),
                )
            )
    tool_call = params.get("toolCall")
    return PermissionAsk(
        session_id=str(params.get("sessionId") or ""),
        tool_call=tool_call if isinstance(tool_call, dict) else {},
        options=tuple(options),
    )


def _update(params: dict[str, Any], update: dict[str, Any]) -> Update:
    kind = str(update.get("sessionUpdate") or "")
    content = update.get("content")
    text = None
    if isinstance(content, dict) and content.get("type") == "text":
        text = content.get("text") if isinstance(content.get("text"), str) else None
    return Update(session_id=str(params.get("sessionId") or ""), kind=kind, text=text, raw=update)
