"""A look at what an agent is doing, for a human away from its terminal: a pane's screen as
text, or a process agent's last reply (it has no screen), shown as approvals show text: every
invisible character a mark, nothing deleted (:mod:`agentcomms.visible`)."""

from __future__ import annotations

from typing import Any, Literal

from agentcomms.bridge import BridgeError, TmuxAdapter
from agentcomms.errors import RpcError
from agentcomms.models import Agent, PaneTarget
from agentcomms.store import Store
from agentcomms.visible import visible
from gateway.agents.mirror import TURN_REPLIES, last_words
from gateway.socket.declare import Human, declare
from gateway.socket.params import AgentId, Params
from gateway.socket.protocol import NOT_FOUND

# What a look shows at most (a chat message's worth), the newest lines kept.
PEEK_CHARS = 3000


class PeekParams(Params):
    agent_id: AgentId


class AgentPeek:
    """What `peek` shows of each agent; its last replies are kept as the hooks tell them."""

    def __init__(self, store: Store, host: str) -> None:
        self._store = store
        self._host = host
        # Each agent's last reply since this gateway started, from its hooks (or its host).
        self._last_replies: dict[str, str] = {}

    async def agent_did(self, agent_id: str, event: str, payload: dict[str, Any]) -> None:
        """An observer of the agents' hooks: keeps the last turn's reply."""
        if event in TURN_REPLIES and (reply := last_words(event, payload)) is not None:
            self._last_replies[agent_id] = reply

    @declare(Human())
    async def peek(self, p: PeekParams) -> dict[str, Any]:
        """An agent's pane as text (on the gateway's host), or a process agent's last reply."""
        agent = await self._store.get_agent(p.agent_id)
        if agent is None:
            raise RpcError(NOT_FOUND, f"no agent {p.agent_id!r}; `agents` lists them")
        return await self.look(agent)

    async def look(self, agent: Agent) -> dict[str, Any]:
        shown: Literal["pane", "last_reply"]
        if agent.type == "process" or agent.target is None:
            shown, text = "last_reply", self._last_replies.get(agent.id)
        else:
            shown, text = "pane", await self._screen(agent)
        return {
            "agent_id": agent.id,
            "state": agent.state,
            "shows": shown,
            "target": agent.target,
            "text": None if text is None else _tail(visible(text)),
        }

    async def _screen(self, agent: Agent) -> str:
        assert agent.target is not None
        if agent.host not in (None, self._host):
            raise RpcError(
                NOT_FOUND, f"{agent.id}'s pane is on {agent.host}; only {self._host}'s are seen"
            )
        adapter = TmuxAdapter()
        pane = PaneTarget(target=agent.target, socket=agent.tmux_socket)
        try:
            info = await adapter.pane_info(pane)
            screen = await adapter.run_commands(
                pane.socket, [["capture-pane", "-p", "-J", "-t", info.pane_id]]
            )
        except BridgeError as exc:
            raise RpcError(
                NOT_FOUND, f"{agent.id}'s pane {agent.target} cannot be read: {exc}"
            ) from exc
        return screen.rstrip()


def _tail(text: str) -> str:
    if len(text) <= PEEK_CHARS:
        return text
    return "…" + text[-(PEEK_CHARS - 1) :]
