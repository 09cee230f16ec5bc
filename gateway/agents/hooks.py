"""The socket method an agent's hooks call (`agentcomms hook <kind>`): what the agent does.

The hook names its agent (``AGENTCOMMS_AGENT_ID``) or the tmux pane it runs in; a pane is matched
against the registrations on this host, by asking its tmux server which pane each registered
target is now. The report is reduced to what the state needs (:func:`report_from`) and signalled
to the agent's mailbox, which keeps the state in order.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from agentcomms.agents.state import AT_PROMPT, HookReport, report_from
from agentcomms.bridge import BridgeError, PaneNotFound, TmuxError, adapter_for
from agentcomms.bridge.fields import TmuxSocket
from agentcomms.bridge.look import at_prompt
from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.errors import RpcError
from agentcomms.models import PaneTarget, Registration
from agentcomms.store import Store
from gateway.socket.declare import Hook, Human, declare
from gateway.socket.params import AgentId, Params, RegisterParams
from gateway.socket.protocol import INVALID_PARAMS, NOT_FOUND
from workflows.mailbox.client import Mailbox

PaneId = Annotated[str, StringConstraints(pattern=r"^%[0-9]{1,9}$")]


class AgentHookParams(Params):
    # acp: a process agent's turn, told by its host's worker (which reports its state itself).
    kind: Literal["claude-code", "codex", "gemini", "acp"]
    event: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    agent_id: AgentId | None = None
    pane: PaneId | None = Field(default=None, description="$TMUX_PANE of the hook, e.g. %7")
    tmux_socket: TmuxSocket | None = Field(default=None, description="first field of $TMUX")
    session_id: Annotated[str, StringConstraints(max_length=128)] | None = None
    at_ns: Annotated[int, Field(ge=0)] = Field(description="the hook's time.time_ns() at start")
    payload: dict[str, Any] = Field(default_factory=dict)


HookObserver = Callable[[str, str, dict[str, Any]], Awaitable[None]]


class PaneAgents:
    """Which registered agent runs in a hook's tmux pane, asked of tmux (the hooks' reports and
    the approvals they open both name their agent this way)."""

    def __init__(self, store: Store, host: str) -> None:
        self._store = store
        self._host = host
        # (tmux socket, pane id) -> the agent last found there: a hook runs around every tool
        # call, so the registrations are not asked of tmux one by one each time.
        self._found: dict[tuple[str, str], str] = {}

    async def agent_of(self, agent_id: str | None, pane: str | None, socket: str | None) -> str:
        """The agent a hook names, else the one registered in the hook's pane."""
        return agent_id or await self._agent_in_pane(pane, socket)

    async def _agent_in_pane(self, pane: str | None, socket: str | None) -> str:
        if pane is None or socket is None:
            raise RpcError(
                NOT_FOUND,
                "the hook names no agent: set AGENTCOMMS_AGENT_ID, or run the agent in a tmux "
                "pane registered with `agentcomms agents register`",
            )
        agents = [
            a
            for a in await self._store.list_agents()
            if a.target is not None
            and a.type == "tmux"
            and (a.host or self._host) == self._host
            and (a.tmux_socket == socket or (a.tmux_socket is None and _default(socket)))
        ]
        # The agent found in this pane before first, checked again: a target may move.
        known = self._found.get((socket, pane))
        agents.sort(key=lambda a: a.id != known)
        for agent in agents:
            assert agent.target is not None
            if await _pane_of(agent.target, socket) == pane:
                self._found[(socket, pane)] = agent.id
                return agent.id
        self._found.pop((socket, pane), None)
        raise RpcError(
            NOT_FOUND,
            f"no registered agent runs in tmux pane {pane} (server {socket}); register it with "
            f"`agentcomms agents register NAME --target {pane}`, or set AGENTCOMMS_AGENT_ID",
        )


class AgentHookMethods:
    """The hooks' report of what the agent does, and registering a pane."""

    def __init__(
        self,
        mailbox: Mailbox,
        host: str,
        panes: PaneAgents,
        *,
        observers: Sequence[HookObserver] = (),
    ) -> None:
        self._mailbox = mailbox
        self._host = host
        self._panes = panes
        # Who else hears what the agent does (the approvals: a tool that ran was answered;
        # the mirror: a turn's reply goes back to the chat that started it).
        # The console's view of a process agent's turn joins once the console is served.
        self.observers = list(observers)

    @declare(Human())
    async def register(self, p: RegisterParams) -> dict[str, Any]:
        """Register the agent whose pane this is (its hook or `agentcomms register`), so messages
        are typed there."""
        if p.type != "tmux":
            raise RpcError(INVALID_PARAMS, f"type: unknown agent type {p.type!r}; known: tmux")
        registration = Registration(
            target=p.target,
            socket=p.socket,
            host=p.host or self._host,
            interrupt_key=p.interrupt_key,
            submit_delay_ms=p.submit_delay_ms,
            max_chars=p.max_chars,
            deliver=p.deliver,
        )
        await self._mailbox.register(p.agent_id, registration)
        if registration.host == self._host:
            await self._look_at_registered(p.agent_id, registration)
        return {"agent_id": p.agent_id, "registered": True, "host": registration.host}

    async def _look_at_registered(self, agent_id: str, registration: Registration) -> None:
        """An agent started before its pane was registered has no hook left to say it is at its
        prompt: one look at the pane says it, where it shows an agent's input box with nothing
        open over it (a plain shell shows none, and stays `unknown`). The agent's next hook,
        later in order, has the last word. Only on the gateway's own host, where tmux is."""
        adapter = adapter_for("tmux")
        assert isinstance(adapter, TmuxAdapter)
        pane = PaneTarget(target=registration.target, socket=registration.socket)
        try:
            info = await adapter.pane_info(pane)
            screen = await adapter.run_commands(
                pane.socket, [["capture-pane", "-p", "-J", "-t", info.pane_id]]
            )
        except BridgeError:
            return  # no pane yet: the agent's hooks will say
        if info.not_ready("idle") is None and at_prompt(screen):
            at_ns = time.time_ns()
            await self._mailbox.report(
                agent_id, HookReport(kind="any", event=AT_PROMPT, at_ns=at_ns)
            )

    @declare(Hook())
    async def agent_hook(self, p: AgentHookParams) -> dict[str, Any]:
        """A hook's report of what its agent did (a prompt taken, a tool used, a turn ended): the
        agent's state and its chat's mirror follow it."""
        agent_id = await self._panes.agent_of(p.agent_id, p.pane, p.tmux_socket)
        report = report_from(p.kind, p.event, p.at_ns, p.session_id, p.payload)
        for observer in self.observers:
            await observer(agent_id, p.event, p.payload)
        if p.kind == "acp":
            return {"agent_id": agent_id, "event": report.event}
        if not await self._mailbox.report(agent_id, report):
            raise RpcError(
                NOT_FOUND,
                f"no agent {agent_id!r} is registered; register its pane first "
                "(`agentcomms agents register`)",
            )
        return {"agent_id": agent_id, "event": report.event}


def _default(socket: str) -> bool:
    """Whether the hook's server is the default one, where a registration without a socket is."""
    return socket.endswith("/default")


async def _pane_of(target: str, socket: str) -> str | None:
    adapter = adapter_for("tmux")
    assert isinstance(adapter, TmuxAdapter)
    try:
        return (await adapter.pane_info(PaneTarget(target=target, socket=socket))).pane_id
    except (PaneNotFound, TmuxError):
        return None
