"""Whether a process belongs to a registered agent's tmux pane: it descends from the pane's
process, it runs on the pane's terminal, or it carries the pane's ``TMUX_PANE`` (on the same tmux
server). What an agent runs (its Bash tool, a script that tool started) is such a process; so is
the agent's MCP server. The human's terminal outside those panes is not.

A process agent has no pane: its process, which its worker on this host started and told the
gateway of (:class:`AgentProcesses`), stands for one. A process that descends from it, or runs in
the session it leads (the worker starts it in a session of its own, so what its tools leave
running in the background stays in it), is that agent's.

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
from agentcomms.models import Agent, Registration
from agentcomms.store import PROJECTION_UNAVAILABLE, Store
from gateway.socket.caller import Peer, ProcStat, ancestors, environ, tty_device

# One tmux question per registered pane: its id, first process, terminal and server socket.
_FORMAT = "#{pane_id}\t#{pane_pid}\t#{pane_tty}\t#{socket_path}"


@dataclass(frozen=True)
class AgentPane:
    agent_id: str
    pane_id: str  # "%7"
    pid: int  # the pane's first process
    tty: str  # "/dev/pts/5"
    server: str  # the tmux server's socket path
    # A process agent's process stands for a pane: its start time, which tells it from a later
    # process given the same pid (None: a tmux pane).
    started: int | None = None

    def __str__(self) -> str:
        if self.started is not None:
            return f"process agent {self.agent_id!r}'s process {self.pid}"
        return f"agent {self.agent_id!r}'s tmux pane {self.pane_id}"


@dataclass(frozen=True)
class InPane:
    """A process found in an agent's pane, and how it was known."""

    pane: AgentPane
    how: str

    def __str__(self) -> str:
        return f"{self.pane} ({self.how})"


def started_at(pid: int) -> int | None:
    """When process ``pid`` started (None: it is gone, or /proc does not say)."""
    try:
        stat = ProcStat.read(pid)
    except (OSError, ValueError, IndexError):
        return None
    return None if stat.state in ("Z", "X") else stat.started


class AgentProcesses:
    """The processes of this host's process agents, each as its worker told the gateway when it
    started it, and as the kernel confirms: the process is the telling worker's own child (the
    socket's peer credentials name the worker), and its start time, read here, names it. A
    process anyone else claims is refused; a claim only ever adds a process to an agent, so no
    process can take an agent's away."""

    def __init__(self) -> None:
        self._started: dict[str, set[tuple[int, int]]] = {}

    def started(self, agent_id: str, pid: int, worker: Peer) -> None:
        """Heard from the worker that started agent ``agent_id``'s process ``pid``; raises
        :class:`ValueError`, saying why, when the kernel does not confirm it."""
        try:
            stat = ProcStat.read(pid)
        except (OSError, ValueError, IndexError):
            raise ValueError(f"no process {pid} runs on this host") from None
        if stat.ppid != worker.pid:
            raise ValueError(
                f"process {pid} is not a child of the process telling it (pid {worker.pid}): "
                "only the worker that started a process agent, on the gateway's host, tells its "
                "process"
            )
        self._started.setdefault(agent_id, set()).add((pid, stat.started))

    def running(self, agent_id: str) -> list[AgentPane]:
        """The agent's processes still running (those gone are forgotten)."""
        alive = {(pid, t) for pid, t in self._started.get(agent_id, ()) if started_at(pid) == t}
        if alive:
            self._started[agent_id] = alive
        else:
            self._started.pop(agent_id, None)
        return [AgentPane(agent_id, "", pid, "", "", started=t) for pid, t in sorted(alive)]


class AgentPanes:
    """The panes of the agents registered on this host, read from tmux when asked: those the
    projection shows, and those whose registration this gateway accepted. The projection hears
    of a registration only once the agent's mailbox has run it (a moment later, or much later
    with no worker up), and a process in a pane registered a moment ago is already an agent's."""

    def __init__(self, store: Store, host: str, *, processes: AgentProcesses | None = None) -> None:
        self._store = store
        self._host = host
        self.processes = processes or AgentProcesses()
        # Per agent, the pane its newest registration accepted here names (target, tmux socket).
        self._accepted: dict[str, tuple[str, str | None]] = {}

    def accepted(self, agent_id: str, registration: Registration) -> None:
        """Heard as the gateway accepts a registration, before the mailbox runs it."""
        if registration.type == "tmux" and (registration.host or self._host) == self._host:
            self._accepted[agent_id] = (registration.target, registration.socket)
        else:
            self._accepted.pop(agent_id, None)  # its pane is on another host now

    async def panes(self, *, deciding: bool = True) -> list[AgentPane]:
        """Raises :class:`PanesUnknown` when they cannot be told (the projection or a tmux
        server does not answer; when ``deciding`` for the human, also a process agent running
        here whose worker has not said which process it is): a guess would let an agent's
        process pass for the human. A hook's report is not held up by a process agent's."""
        try:
            agents = await self._store.list_agents(include_offline=True)
        except PROJECTION_UNAVAILABLE as exc:
            raise PanesUnknown(f"the projection cannot be read ({exc})") from exc
        here = [a for a in agents if (a.host or self._host) == self._host]
        targets = {
            (a.id, a.target, a.tmux_socket)
            for a in here
            if a.type == "tmux" and a.target is not None
        }
        targets |= {(agent, target, socket) for agent, (target, socket) in self._accepted.items()}
        found = await asyncio.gather(*(_pane(*target) for target in sorted(targets, key=str)))
        panes = [pane for pane in found if pane is not None]
        for agent in (a for a in here if a.type == "process"):
            running = self.processes.running(agent.id)
            if deciding and not running and _has_run(agent):
                raise PanesUnknown(
                    f"process agent {agent.id!r} runs on this host, and its worker has not told "
                    "this gateway which process it is (a gateway started after the worker hears "
                    "it as the agent asks its next permission, or starts again: restart the "
                    "worker)"
                )
            panes += running
        return panes


def _has_run(agent: Agent) -> bool:
    """Whether the projection says a process agent's process runs: it has reported its session
    started (its worker told the gateway its process before that). Registered and not yet
    started ("unknown"), or stopped, it has no process that could pass for the human."""
    return agent.status != "offline" and agent.state not in ("offline", "unknown")


@dataclass(frozen=True)
class Whereabouts:
    """Where a process runs, as /proc says it: its line of parents, its terminal, and the tmux
    pane and server its environment names."""

    lineage: tuple[int, ...]  # itself, then its parents, nearest first
    tty_nr: int
    tmux_pane: str | None
    tmux_server: str
    session: int = 0  # the leader of its session

    @classmethod
    def of(cls, pid: int) -> Whereabouts:
        env = environ(pid)
        try:
            stat = ProcStat.read(pid)
            tty_nr, session = stat.tty_nr, stat.session
        except (OSError, ValueError, IndexError):
            tty_nr = session = 0
        return cls(
            (pid, *ancestors(pid)),
            tty_nr,
            env.get("TMUX_PANE"),
            env.get("TMUX", "").split(",")[0],
            session,
        )

    def inside(self, panes: list[AgentPane]) -> InPane | None:
        """Which of ``panes`` the process belongs to (None: none of them)."""
        for pane in panes:
            if pane.started is not None:
                if (found := self._of_process(pane)) is not None:
                    return found
                continue
            if pane.pid in self.lineage:
                return InPane(pane, f"it descends from the pane's process {pane.pid}")
            if self.tty_nr and _same_terminal(self.tty_nr, pane.tty):
                return InPane(pane, f"it runs on the pane's terminal {pane.tty}")
            if self.tmux_pane == pane.pane_id and same_file(self.tmux_server, pane.server):
                return InPane(pane, f"it carries the pane's TMUX_PANE={pane.pane_id}")
        return None

    def _of_process(self, agent: AgentPane) -> InPane | None:
        if agent.pid in self.lineage:
            how = f"it descends from the agent's process {agent.pid}"
        elif self.session == agent.pid:
            how = f"it runs in the session the agent's process {agent.pid} leads"
        else:
            return None
        # The pid must still be the agent's: a later process given it is nobody's agent.
        return InPane(agent, how) if started_at(agent.pid) == agent.started else None


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
