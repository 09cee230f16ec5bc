"""Who may ask what: each request is admitted as its method's declaration says
(:mod:`gateway.socket.declare`), before the method runs.

A request that acts for an agent (the MCP server names the agent its bearer token belongs to)
reads and writes only what is that agent's own: its mailbox, events and calls, its own side of
the terminal and of its talks with other agents, and its own chats (those mapped to it in
``chat.channels`` and those its messages came from). What decides for the human (answering an
approval, admitting a sender, the phone menu) is refused also to any process that runs in a
registered agent's tmux pane, or descends from a process agent's process, whatever the request
says: the kernel names the connecting process (the socket's peer credentials), and
:mod:`gateway.socket.panes` says whose pane (or process agent) it belongs to. A
request with no agent, from outside the agents' panes, is the human's: the socket is the user's
own (0600).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentcomms.config import Config
from agentcomms.errors import PanesUnknown, RpcError
from agentcomms.models import LOCAL_CHANNEL
from agentcomms.store import Store
from gateway.socket.declare import Anyone, Hook, Human
from gateway.socket.panes import InPane, Whereabouts, same_file
from gateway.socket.params import EventsParams, HistoryParams, Params, ReplyParams
from gateway.socket.protocol import NOT_YOURS

if TYPE_CHECKING:
    from gateway.socket.caller import Caller, Peer
    from gateway.socket.declare import Method
    from gateway.socket.panes import AgentPanes

# Channels that hold many talks, not one chat: an agent reads only its own side of them.
_SHARED_PREFIXES = ("agent:",)


class Confinement:
    """Admits each request as its method's declaration says."""

    def __init__(self, cfg: Config, store: Store, panes: AgentPanes) -> None:
        self._cfg = cfg
        self._store = store
        self._panes = panes

    async def admit(self, method: Method, params: Params, caller: Caller) -> Params:
        """The params to run ``method`` with; raises :class:`RpcError` ``NOT_YOURS`` when the
        caller may not ask it."""
        who = method.who
        if caller.hooks_door:
            return await self._through_hooks_door(method, params, caller)
        if isinstance(who, Human) and who.decides:
            params = await self._outside_agents_panes(method, params, caller)
        if isinstance(who, Hook) and caller.agent is None:
            return await self._own_pane(method, params, caller)
        if caller.agent is None or isinstance(who, Anyone):
            return params
        agent = caller.agent
        if isinstance(who, Human | Hook):
            raise RpcError(
                NOT_YOURS,
                f"{method.name} is not open to agents: this request acts for agent {agent!r}, "
                f"and {method.name} is for {who} only.",
            )
        field = who.param
        if field is not None and (named := getattr(params, field)) != agent:
            raise RpcError(
                NOT_YOURS,
                f"{field}: {repr(named)[:80]} refused: this request acts for agent "
                f"{agent!r}, and an agent acts only for itself. Pass {field}={agent!r}.",
            )
        if method.check is not None:
            checked: Params = await method.check(self, agent, params)
            return checked
        return params

    async def _outside_agents_panes(self, method: Method, params: Params, caller: Caller) -> Params:
        """Refuse a decision for the human to a process in a registered agent's pane."""
        assert isinstance(method.who, Human)
        if caller.peer is None:  # the gateway's own surface (the console), which admitted the human
            return params
        found = await self._placed(method, caller.peer, "decides for the human")
        if found is None:
            return params
        if method.who.pane_may is not None and method.who.pane_may(params):
            # What a hook may still say, only of its own pane's agent.
            return _for_agent(params, found.pane.agent_id)
        raise RpcError(
            NOT_YOURS,
            f"{method.name} decides for the human, and the process asking (pid "
            f"{caller.peer.pid}) runs in {found}: an agent may not answer for its human. Answer "
            "from a terminal outside the agents' panes, the console, or a chat.",
        )

    async def _through_hooks_door(self, method: Method, params: Params, caller: Caller) -> Params:
        """The hooks' own door, which any local user may open: only a process in a registered
        agent's pane, asking what a hook may, for that pane's agent."""
        peer = caller.peer
        found = None
        if peer is not None and caller.agent is None:
            found = await self._placed(method, peer, "is a hook's, for its own pane")
        if found is None or peer is None:
            raise RpcError(
                NOT_YOURS,
                f"{method.name} refused: the hooks' door serves only an agent's hooks, in the "
                "agent's registered tmux pane, and this process runs in none (register the pane "
                "with `agentcomms agents register`).",
            )
        if isinstance(method.who, Human):  # what a hook may still say of a decision
            assert method.who.pane_may is not None
            if not method.who.pane_may(params):
                raise RpcError(
                    NOT_YOURS,
                    f"{method.name} decides for the human, and the hooks' door serves only "
                    f"agents' hooks: this process runs in {found}.",
                )
            return _for_agent(params, found.pane.agent_id)
        return self._claims(method, params, peer, found)

    async def _own_pane(self, method: Method, params: Params, caller: Caller) -> Params:
        """A hook acts for the pane it runs in: a process in an agent's pane that names another
        agent or pane is refused, and one that names none acts for its pane's agent. A process
        outside every agent's pane is the human's, who may report for any."""
        if caller.peer is None:
            return params
        found = await self._placed(method, caller.peer, "is a hook's, for its own pane")
        if found is None:
            return params
        return self._claims(method, params, caller.peer, found)

    def _claims(self, method: Method, params: Params, peer: Peer, found: InPane) -> Params:
        """``params`` for the agent of the pane ``found``, or refused when they name another."""
        pane = found.pane
        agent = getattr(params, "agent_id", None)
        named = getattr(params, "pane", None)
        server = getattr(params, "tmux_socket", None)
        if agent is not None and agent != pane.agent_id:
            claim = f"agent {agent!r}"
        elif named is not None and (
            named != pane.pane_id or not same_file(server or "", pane.server)
        ):
            claim = f"tmux pane {named} (server {server})"
        else:
            return _for_agent(params, pane.agent_id)
        raise RpcError(
            NOT_YOURS,
            f"{method.name} refused: it names {claim}, and the process asking (pid "
            f"{peer.pid}) runs in {found}. A hook reports only for the agent in its own "
            f"pane: leave AGENTCOMMS_AGENT_ID unset there, or set it to {pane.agent_id!r}.",
        )

    async def _placed(self, method: Method, peer: Peer, what: str) -> InPane | None:
        """The agent's pane the connecting process runs in (None: none); refused when that
        cannot be told."""
        process = Whereabouts.of(peer.pid)  # read at once, while the process is surely there
        if not peer.alive():
            # A process gone before it is looked at could have been anyone's: a pane's process
            # that wrote its request and exited at once must not pass for the human.
            raise RpcError(
                NOT_YOURS,
                f"{method.name} {what}, and the process that asked (pid {peer.pid}) was gone "
                "before the gateway could tell where it ran. Ask from a process that waits for "
                "the answer (the agentcomms command does).",
            )
        try:
            panes = await self._panes.panes(deciding=isinstance(method.who, Human))
        except PanesUnknown as exc:
            raise RpcError(
                NOT_YOURS,
                f"{method.name} {what}, and the gateway cannot tell now whether the process "
                f"asking (pid {peer.pid}) runs in an agent's pane: {exc}. Try again in a moment.",
            ) from exc
        return process.inside(panes)

    def notifies(self, agent: str, channel: str) -> bool:
        """Whether `channel` is the human's notification topic, which `agent` may write to
        (``notify.agents_may_send``): a one-way notification, nothing comes back from it."""
        cfg = self._cfg
        return cfg.notify.may_send(cfg.chat.ntfy, cfg.chat.channels, agent, channel)

    async def own_chat(self, agent: str, channel: str, doing: str) -> None:
        mapped = self._cfg.chat.channels.get(channel)
        if mapped == agent:
            return
        if not channel.startswith(_SHARED_PREFIXES) and await self._store.came_from(agent, channel):
            return
        whose = f"it is mapped to agent {mapped!r}" if mapped else "it is mapped to no agent"
        raise RpcError(
            NOT_YOURS,
            f"agent {agent!r} may not {doing} {channel}: {whose}, and no message of "
            f"{agent!r}'s came from it. An agent reads and writes only its own chats: those "
            f'mapped to it in the config\'s chat.channels (add "{channel}": "{agent}" there '
            "and restart agentcomms) and those its messages came from.",
        )


def _for_agent(params: Params, agent: str) -> Params:
    """``params`` acting for the agent of the pane they came from, where they can name one."""
    if "agent_id" in type(params).model_fields and getattr(params, "agent_id", None) is None:
        return params.model_copy(update={"agent_id": agent})
    return params


# ---- the checks methods name in their declarations -----------------------------------------------


async def without_refused(_: Confinement, agent: str, p: EventsParams) -> EventsParams:
    """A stranger's refused message, or a forgery, is the human's to audit: its text is not for
    the agent's eyes, whatever the request asked."""
    return p.model_copy(update={"rejected": False})


async def to_own_chat(rules: Confinement, agent: str, p: ReplyParams) -> ReplyParams:
    """A reply goes to the terminal (the agent's own talk with its human), to a chat of its
    own, or to the human's notification topic where agents may notify."""
    if p.channel_id != LOCAL_CHANNEL and not rules.notifies(agent, p.channel_id):
        await rules.own_chat(agent, p.channel_id, "write to")
    return p


async def own_history(rules: Confinement, agent: str, p: HistoryParams) -> HistoryParams:
    """An agent reads its own side of any channel, or the whole of a chat of its own."""
    if p.agent_id == agent:
        return p
    if p.channel_id == LOCAL_CHANNEL or p.channel_id.startswith(_SHARED_PREFIXES):
        raise RpcError(
            NOT_YOURS,
            f"{p.channel_id} holds other agents' talks too: agent {agent!r} reads only its "
            f"own side of it (agent_id={agent!r}).",
        )
    await rules.own_chat(agent, p.channel_id, "read")
    return p
