"""Starting and stopping a process agent: an ACP agent the host's worker runs headless.

`start_agent` registers the agent as a process agent (its command and folder in the signed
registration); the mailbox moves to the host's queue and the host's worker starts the process
and opens its session. `stop_agent` unregisters it: the worker ends the process, its session is
kept, and messages sent meanwhile wait for the next start. `clear_agent` has the worker open a
new session for it (the old one is left), through the mailbox as a signed interrupt.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from pathlib import Path, PurePath
from typing import Annotated, Any

from pydantic import Field, StringConstraints

from agentcomms.acp.kinds import KindUnavailable, find, install, portable
from agentcomms.config import AgentConfig
from agentcomms.errors import RpcError
from agentcomms.ids import new_event_id
from agentcomms.models import LOCAL_CHANNEL, MAX_MESSAGE_CHARS, Event, Registration
from agentcomms.store import Store
from gateway.socket.caller import Caller
from gateway.socket.declare import Hook, Human, declare
from gateway.socket.panes import AgentProcesses
from gateway.socket.params import AgentId, Params
from gateway.socket.protocol import INVALID_PARAMS, NOT_FOUND, NOT_YOURS
from workflows.mailbox.client import Mailbox

log = logging.getLogger(__name__)

Word = Annotated[str, StringConstraints(min_length=1, max_length=4096)]


class StartAgentParams(Params):
    agent_id: AgentId
    dir: Annotated[str, StringConstraints(min_length=1, max_length=4096)] = Field(
        description="the folder the agent works in (absolute)"
    )
    command: Annotated[list[Word], Field(min_length=1, max_length=256)] = Field(
        description="the ACP agent's command and its arguments"
    )
    host: str | None = Field(default=None, description="the host whose worker runs it")
    new_session_if_lost: bool = Field(
        default=True, description="start a new session when the kept one cannot be loaded"
    )
    max_chars: Annotated[int, Field(ge=100, le=MAX_MESSAGE_CHARS)] = MAX_MESSAGE_CHARS


class StopAgentParams(Params):
    agent_id: AgentId


class ClearAgentParams(Params):
    agent_id: AgentId
    reason: Annotated[str, StringConstraints(max_length=500)] | None = Field(
        default=None, description="why, kept in the agent's events"
    )


class AgentProcessParams(Params):
    agent_id: AgentId
    pid: int = Field(ge=2, description="the agent's process, a child of the worker telling it")


class ProcessAgentMethods:
    def __init__(
        self,
        mailbox: Mailbox,
        store: Store,
        host: str,
        *,
        running: AgentProcesses | None = None,
    ) -> None:
        self._mailbox = mailbox
        self._store = store
        self._host = host
        self.running = running or AgentProcesses()

    @declare(Hook())
    async def agent_process(self, p: AgentProcessParams, caller: Caller) -> dict[str, Any]:
        """A worker on this host started a process agent's process: what descends from it is
        that agent's, never the human's. The kernel must confirm it (the process is the
        caller's own child), whatever the request says."""
        if caller.peer is None:
            raise RpcError(NOT_YOURS, "agent_process is told by a worker through the socket")
        try:
            self.running.started(p.agent_id, p.pid, caller.peer)
        except ValueError as exc:
            raise RpcError(NOT_YOURS, f"agent_process refused: {exc}") from None
        return {"agent_id": p.agent_id, "pid": p.pid}

    @declare(Human())
    async def start_agent(self, p: StartAgentParams) -> dict[str, Any]:
        folder = PurePath(p.dir)
        host = p.host or self._host
        if not folder.is_absolute():
            raise RpcError(INVALID_PARAMS, f"dir: {p.dir!r} is not an absolute path")
        # The gateway sees this host's folders only; another host's worker says so itself.
        if host == self._host and not await asyncio.to_thread(Path(folder).is_dir):
            raise RpcError(
                INVALID_PARAMS, f"dir: {p.dir} is not a folder on {host}; create it first"
            )
        registration = Registration(
            type="process",
            target=_shown(p.command),
            host=host,
            max_chars=p.max_chars,
            command=list(p.command),
            cwd=str(folder),
            new_session_if_lost=p.new_session_if_lost,
        )
        await self._mailbox.register(p.agent_id, registration)
        return {
            "agent_id": p.agent_id,
            "started": True,
            "host": host,
            "target": registration.target,
        }

    @declare(Human())
    async def stop_agent(self, p: StopAgentParams) -> dict[str, Any]:
        agent = await self._store.get_agent(p.agent_id)
        if agent is None or agent.type != "process":
            raise RpcError(
                NOT_FOUND,
                f"no process agent {p.agent_id!r}: `agentcomms agents --all` lists them; a pane "
                "agent is unregistered with `agentcomms agents unregister`",
            )
        await self._mailbox.unregister(p.agent_id)
        return {"agent_id": p.agent_id, "stopped": True}

    @declare(Human())
    async def clear_agent(self, p: ClearAgentParams) -> dict[str, Any]:
        """Start a new session for a process agent (its turn, if one runs, is cancelled first);
        the old session is left as it was."""
        event_id = await self.clear(
            p.agent_id, LOCAL_CHANNEL, {"reason": p.reason or "a new session", "source": "cli"}
        )
        return {"agent_id": p.agent_id, "event_id": event_id, "new_session": True}

    async def clear(self, agent_id: str, channel_id: str, said: dict[str, Any]) -> str:
        """Post the agent's mailbox an interrupt that leaves its session for a new one, signed
        like any interrupt, so only the deployment clears an agent; the event's id."""
        agent = await self._store.get_agent(agent_id)
        if agent is None or agent.type != "process":
            what = "no agent" if agent is None else "a pane agent, whose session is its pane's"
            raise RpcError(
                NOT_FOUND,
                f"{agent_id!r} is {what}: only a process agent's session is started anew "
                "(`agentcomms agents` lists them; clear a pane agent at its terminal)",
            )
        event = Event(
            id=new_event_id(),
            agent_id=agent_id,
            channel_id=channel_id,
            type="interrupt",
            role="human",
            payload={**said, "new_session": True},
        )
        await self._mailbox.post(event)
        return event.id


async def start_configured(mailbox: Mailbox, agent_id: str, agent: AgentConfig, host: str) -> None:
    """A process agent of the config (`agents.ID.acp`), started as `up` starts: registered with
    its command, a known kind's found (or installed with npm) on this host first, or, for an
    agent on another host, its program's name, which that host's worker finds there."""
    acp = agent.acp
    assert acp is not None
    elsewhere = agent.host not in (None, host)
    try:
        # Another host's worker finds the kind there: nothing of this machine's is looked at.
        command = acp.command or (
            portable(acp.kind) if elsewhere and acp.kind else await _kind_command(acp.kind)
        )
    except KindUnavailable as exc:
        log.error("agents.%s.acp: %s", agent_id, exc)
        return
    registration = Registration(
        type="process",
        target=_shown(command),
        host=agent.host or host,
        max_chars=agent.max_chars,
        command=list(command),
        cwd=str(acp.dir),
        new_session_if_lost=acp.new_session_if_lost,
    )
    await mailbox.register(agent_id, registration)


async def _kind_command(kind: str | None) -> list[str]:
    assert kind is not None  # the config's own check: a command or a kind
    found = find(kind)
    if found is not None:
        return found
    return await asyncio.to_thread(install, kind)


def _shown(command: list[str]) -> str:
    """What `agents` shows for a process agent: its command, short."""
    shown = "acp: " + shlex.join([Path(command[0]).name, *command[1:]])
    return shown if len(shown) <= 200 else shown[:199] + "…"
