"""Whether a process belongs to a registered agent's tmux pane: it descends from the pane's
process, it runs on the pane's terminal, or it carries the pane's ``TMUX_PANE`` (on the same tmux
server). What an agent runs (its Bash tool, a script that tool started) is such a process; so is
the agent's MCP server. The human's terminal outside those panes is not.

Running each agent as its own Unix user is the hard boundary; this is a guard, on the same user,
against an agent (or what it was told to do) answering for its human.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from agentcomms.bridge import PaneNotFound, adapter_for
from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.errors import InvalidTarget, PanesUnknown, TmuxError
from agentcomms.models import Registration
from agentcomms.store import PROJECTION_UNAVAILABLE, Store
from gateway.socket.caller import ProcStat, ancestors, environ, tty_device

# One tmux question per registered pane: its id, first process, terminal and server socket.
_FORMAT = "#{pane_id}\t#{pane_pid}\t#{pane_tty}\t#{socket_path}"


@dataclass(frozen=True)
class AgentPane:
    agent_id: str
    pane_id: str  # "%7"
    pid: int  # the pane's first process
    tty: str  # "/dev/pts/5"
    server: str  # the tmux server's socket path


@dataclass(frozen=True)
class InPane:
    """A process found in an agent's pane, and how it was known."""

    pane: AgentPane
    how: str

    def __str__(self) -> str:
        return f"agent {self.pane.agent_id!r}'s tmux pane {self.pane.pane_id} ({self.how})"


class AgentPanes:
    """The panes of the agents registered on this host, read from tmux when asked: those the
    projection shows, and those whose registration this gateway accepted. The projection hears
    of a registration only once the agent's mailbox has run it (a moment later, or much later
    with no worker up), and a process in a pane registered a moment ago is already an agent's."""

    def __init__(self, store: Store, host: str) -> None:
        self._store = store
        self._host = host
        # Per agent, the pane its newest registration accepted here names (target, tmux socket).
        self._accepted: dict[str, tuple[str, str | None]] = {}

    def accepted(self, agent_id: str, registration: Registration) -> None:
        """Heard as the gateway accepts a registration, before the mailbox runs it."""
        if (registration.host or self._host) == self._host:
            self._accepted[agent_id] = (registration.target, registration.socket)
        else:
            self._accepted.pop(agent_id, None)  # its pane is on another host now

    async def panes(self) -> list[AgentPane]:
        """Raises :class:`PanesUnknown` when they cannot be told (the projection or a tmux
        server does not answer): a guess would let an agent's process pass for the human."""
        try:
            agents = await self._store.list_agents(include_offline=True)
        except PROJECTION_UNAVAILABLE as exc:
            raise PanesUnknown(f"the projection cannot be read ({exc})") from exc
        targets = {
            (a.id, a.target, a.tmux_socket)
            for a in agents
            if a.target is not None and (a.host or self._host) == self._host
        }
        targets |= {(agent, target, socket) for agent, (target, socket) in self._accepted.items()}
        found = await asyncio.gather(*(_pane(*target) for target in sorted(targets, key=str)))
        return [pane for pane in found if pane is not None]


@dataclass(frozen=True)
class Whereabouts:
    """Where a process runs, as /proc says it: its line of parents, its terminal, and the tmux
    pane and server its environment names."""

    lineage: tuple[int, ...]  # itself, then its parents, nearest first
    tty_nr: int
    tmux_pane: str | None
    tmux_server: str

    @classmethod
    def of(cls, pid: int) -> Whereabouts:
        env = environ(pid)
        try:
            tty_nr = ProcStat.read(pid).tty_nr
        except (OSError, ValueError):
            tty_nr = 0
        return cls(
            (pid, *ancestors(pid)),
            tty_nr,
            env.get("TMUX_PANE"),
            env.get("TMUX", "").split(",")[0],
        )

    def inside(self, panes: list[AgentPane]) -> InPane | None:
        """Which of ``panes`` the process belongs to (None: none of them)."""
        for pane in panes:
            if pane.pid in self.lineage:
                return InPane(pane, f"it descends from the pane's process {pane.pid}")
            if self.tty_nr and _same_terminal(self.tty_nr, pane.tty):
                return InPane(pane, f"it runs on the pane's terminal {pane.tty}")
            if self.tmux_pane == pane.pane_id and same_file(self.tmux_server, pane.server):
                return InPane(pane, f"it carries the pane's TMUX_PANE={pane.pane_id}")
        return None


def holding(pid: int, panes: list[AgentPane]) -> InPane | None:
    """Which of ``panes`` process ``pid`` belongs to (None: none of them)."""
    return Whereabouts.of(pid).inside(panes)


def _same_terminal(tty_nr: int, tty: str) -> bool:
    try:
        rdev = os.stat(tty).st_rdev
    except OSError:
        return False
    return tty_device(tty_nr) == (os.major(rdev), os.minor(rdev))


def same_file(a: str, b: str) -> bool:
    if not a or not b:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a == b


async def _pane(agent_id: str, target: str, socket: str | None) -> AgentPane | None:
    adapter = adapter_for("tmux")
    assert isinstance(adapter, TmuxAdapter)
    try:
        out = await adapter.run_commands(socket, [["display-message", "-p", "-t", target, _FORMAT]])
    except (PaneNotFound, InvalidTarget):
        return None  # no pane (or no server) there now: nothing runs in it
    except TmuxError as exc:
        raise PanesUnknown(
            f"agent {agent_id!r}'s tmux server ({socket or 'the default one'}) did not say "
            f"which pane {target} is: {exc}"
        ) from exc
    fields = out.strip().split("\t")
    if len(fields) != 4 or not fields[1].isdigit():
        return None
    pane_id, pid, tty, server = fields
    return AgentPane(agent_id, pane_id, int(pid), tty, server)
