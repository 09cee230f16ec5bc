"""Agents from a chat: an allowed sender's ``/new``, ``/agents``, ``/stop``, ``/esc``,
``/peek`` and ``/clear``, answered in the chat and never passed to an agent.

The inbox runs these after its allowlist, so a stranger's ``/new`` is refused like any of their
messages. A chat names a folder and a kind, never a command: the folder must lie under one of
``acp.roots`` (``agents.start.roots``) once symlinks and ``..`` are resolved, and the kind is a
known one or one the operator wrote into ``acp.kinds`` (:mod:`gateway.agents.starting`, which
the console's New agent form shares). Each command is recorded under the provider's message
id, so one the provider sends again runs once.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcomms.config import Config
from agentcomms.errors import RpcError
from agentcomms.ids import check_agent_id, new_event_id
from agentcomms.models import Agent, Event, utcnow
from agentcomms.store import Store
from agentcomms.transports import InboundMessage
from gateway.agents.peek import AgentPeek
from gateway.agents.processes import ProcessAgentMethods, StopAgentParams
from gateway.agents.starting import DEFAULT_KIND, NewAgents
from gateway.agents.windows import INTERRUPT_KEY, open_window
from gateway.socket.params import RegisterParams
from workflows.mailbox.client import Mailbox

log = logging.getLogger(__name__)

# "/new@my_bot backend ~/src/api": Telegram names the bot after a command in a group.
_COMMAND = re.compile(r"^/([a-z]+)(?:@\S+)?(?:\s+(.*))?$", re.DOTALL | re.IGNORECASE)
USAGE = {
    "new": "/new ID DIR [KIND] [--tmux]: start an agent in DIR, headless or in a new tmux "
    "window (kind: {kinds})",
    "agents": "/agents: the agents, their state and what waits for each",
    "stop": "/stop ID: stop a process agent (its session is kept)",
    "esc": "/esc ID: interrupt the agent's turn",
    "peek": "/peek ID: a pane's screen, or a process agent's last reply",
    "clear": "/clear ID: a new session for a process agent (the old one is left)",
}
# The agents /agents lists at most (a line each), so its answer is one chat message.
LISTED = 40


@dataclass(frozen=True)
class Command:
    name: str
    args: list[str]


def parse(text: str) -> Command | None:
    """The chat command `text` is, or None for a message to pass on (`/etc/hosts?` included)."""
    found = _COMMAND.match(text.strip())
    if found is None or found[1].lower() not in USAGE:
        return None
    return Command(found[1].lower(), (found[2] or "").split())


class ChatCommands:
    """The commands an allowed sender gives in a chat, each answered there in one message."""

    def __init__(
        self,
        cfg: Config,
        store: Store,
        mailbox: Mailbox,
        processes: ProcessAgentMethods,
        peek: AgentPeek,
        register: Callable[[RegisterParams], Awaitable[dict[str, Any]]],
        new_agents: NewAgents,
    ) -> None:
        self._cfg = cfg
        self._store = store
        self._mailbox = mailbox
        self._processes = processes
        # The console's New agent form starts agents the same way.
        self._new_agents = new_agents
        self._looks = peek
        # The pane register of the agents' hooks: a window's pane is registered as any is.
        self._register = register

    async def run(self, command: Command, message: InboundMessage, event_id: str) -> str:
        """Run `command` for the allowed sender of `message`; the answer for the chat."""
        await self._store.record_event(
            Event(
                id=event_id,
                agent_id=command.args[0] if command.args and _is_id(command.args[0]) else "default",
                channel_id=message.channel_id,
                type="system",
                role="human",
                status="delivered",
                payload={
                    "text": message.text[:1000],
                    "command": command.name,
                    "sender_id": message.sender_id,
                    "sender_name": message.sender_name,
                    "provider": message.provider,
                    "chat_id": message.chat_id,
                },
                created_at=utcnow(),
            )
        )
        log.info(
            "%s: /%s from %s:%s",
            message.channel_id,
            command.name,
            message.provider,
            message.sender_id,
        )
        try:
            run = {
                "new": self._new,
                "agents": self._agents,
                "stop": self._stop,
                "esc": self._esc,
                "peek": self._peek,
                "clear": self._clear,
            }[command.name]
            return await run(command.args, message)
        except (RpcError, ValueError) as exc:
            return _sentence(exc)

    async def _new(self, args: list[str], message: InboundMessage) -> str:
        in_tmux = "--tmux" in args
        args = [a for a in args if a != "--tmux"]
        if len(args) not in (2, 3):
            return "usage: " + self.usage("new")
        agent_id, folder = args[0], args[1]
        kind = args[2] if len(args) == 3 else DEFAULT_KIND
        if in_tmux:
            resolved = await self._new_agents.checked(agent_id, folder)
            return await self._new_window(agent_id, resolved, kind)
        result, resolved = await self._new_agents.start(agent_id, folder, kind)
        started = f"started {agent_id} ({kind}) in {resolved} on {result['host']}."
        if message.channel_id not in self._cfg.chat.channels:
            # "@agent" routes from a mapped chat only: a stranger's group cannot reach agents.
            return (
                f"{started} To write to it from here, the operator maps this chat in "
                f'chat.channels ("{message.channel_id}": "{agent_id}").'
            )
        return (
            f"{started} Write to it with @{agent_id} at the start of a message; "
            f"/peek {agent_id} shows its last reply."
        )

    async def _new_window(self, agent_id: str, folder: Path, kind: str) -> str:
        if not await asyncio.to_thread(folder.is_dir):
            raise ValueError(f"{folder} is not a folder on this host; create it first")
        window = await open_window(self._cfg, agent_id, folder, kind)
        await self._register(
            RegisterParams(
                agent_id=agent_id,
                target=window.target,
                socket=window.socket,
                interrupt_key=INTERRUPT_KEY,
            )
        )
        server = f" (tmux -S {window.socket})" if window.socket else ""
        return (
            f"started {agent_id} ({kind}) in {folder}, in tmux window {window.target}{server}: "
            f"attach with `tmux attach -t {window.target.partition(':')[0]}`."
        )

    async def _agents(self, args: list[str], message: InboundMessage) -> str:
        agents = await self._store.list_agents()
        if not agents:
            return "No agents are registered. Start one: " + self.usage("new")
        lines = [_agent_line(a) for a in agents[:LISTED]]
        if len(agents) > LISTED:  # one chat message holds this many
            lines.append(f"… and {len(agents) - LISTED} more: `agentcomms agents` lists them all")
        return "\n".join(lines)

    async def _stop(self, args: list[str], message: InboundMessage) -> str:
        agent = await self._one_agent(args, "stop")
        if agent.type != "process":
            return (
                f"{agent.id} runs in a tmux pane a human set up: stop it there "
                f"(/esc {agent.id} interrupts its turn)."
            )
        await self._processes.stop_agent(StopAgentParams(agent_id=agent.id))
        return f"stopped {agent.id}; messages to it wait until it is started again."

    async def _esc(self, args: list[str], message: InboundMessage) -> str:
        agent = await self._one_agent(args, "esc")
        await self._mailbox.post(
            Event(
                id=new_event_id(),
                agent_id=agent.id,
                channel_id=message.channel_id,
                type="interrupt",
                role="human",
                payload={
                    "reason": f"/esc from {message.channel_id}",
                    "source": message.provider,
                    "sender_id": message.sender_id,
                },
            )
        )
        return f"interrupting {agent.id}."

    async def _clear(self, args: list[str], message: InboundMessage) -> str:
        agent = await self._one_agent(args, "clear")
        if agent.type != "process":
            return (
                f"{agent.id} runs in a tmux pane: its session is cleared there (its own /clear); "
                "here only a process agent's is."
            )
        said = {
            "reason": f"/clear from {message.channel_id}",
            "source": message.provider,
            "sender_id": message.sender_id,
        }
        await self._processes.clear(agent.id, message.channel_id, said)
        return (
            f"{agent.id} starts a new session; its old one is left as it was. A turn it was in "
            "is cancelled first."
        )

    async def _peek(self, args: list[str], message: InboundMessage) -> str:
        agent = await self._one_agent(args, "peek")
        seen = await self._looks.look(agent)
        if seen["shows"] == "pane":
            return f"{agent.id} ({agent.state}), pane {agent.target}:\n{seen['text']}"
        if seen["text"] is None:
            return f"{agent.id} ({agent.state}) has not finished a turn since the gateway started."
        return f"{agent.id} ({agent.state}), its last reply:\n{seen['text']}"

    async def _one_agent(self, args: list[str], name: str) -> Agent:
        if len(args) != 1:
            raise ValueError("usage: " + self.usage(name))
        agent = await self._store.get_agent(args[0]) if _is_id(args[0]) else None
        if agent is None:
            raise ValueError(f"no agent {args[0]!r}; /agents lists them")
        return agent

    def usage(self, name: str) -> str:
        return USAGE[name].format(kinds=", ".join(self._new_agents.kinds()))


def _is_id(word: str) -> bool:
    try:
        check_agent_id(word)
    except ValueError:
        return False
    return True


def _agent_line(agent: Agent) -> str:
    waits = f", {agent.pending} waiting" if agent.pending else ""
    where = "process" if agent.type == "process" else f"pane {agent.target}"
    return f"{agent.id}: {agent.state} ({where}{waits})"


def _sentence(exc: Exception) -> str:
    text = exc.message if isinstance(exc, RpcError) else str(exc)
    return text if text.endswith((".", "!", "?")) else text + "."
