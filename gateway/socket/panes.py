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

from agentcomms.bridge import BridgeError, adapter_for
from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.store import Store
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
    """The panes of the agents registered on this host, read from tmux when asked."""

    def __init__(self, store: Store, host: str) -> None:
        self._store = store
        self._host = host

    async def panes(self) -> list[AgentPane]:
        targets = [
            (a.id, a.target, a.tmux_socket)
            for a in await self._store.list_agents(include_offline=True)
            if a.target is not None and (a.host or self._host) == self._host
        ]
        found = await asyncio.gather(*(_pane(*target) for target in targets))
        return [pane for pane in found if pane is not None]

    async def holding(self, pid: int) -> InPane | None:
        """The registered agent's pane process ``pid`` belongs to, or None."""
        panes = await self.panes()
        return holding(pid, panes) if panes else None


def holding(pid: int, panes: list[AgentPane]) -> InPane | None:
    """Which of ``panes`` process ``pid`` belongs to (None: none of them)."""
    lineage = [pid, *ancestors(pid)]
    env = environ(pid)
    try:
        tty_nr = ProcStat.read(pid).tty_nr
    except (OSError, ValueError):
        tty_nr = 0
    tmux_server = env.get("TMUX", "").split(",")[0]
    for pane in panes:
        if pane.pid in lineage:
            return InPane(pane, f"it descends from the pane's process {pane.pid}")
        if tty_nr and _same_terminal(tty_nr, pane.tty):
            return InPane(pane, f"it runs on the pane's terminal {pane.tty}")
        if env.get("TMUX_PANE") == pane.pane_id and _same_file(tmux_server, pane.server):
            return InPane(pane, f"it carries the pane's TMUX_PANE={pane.pane_id}")
    return None


def _same_terminal(tty_nr: int, tty: str) -> bool:
    try:
        rdev = os.stat(tty).st_rdev
    except OSError:
        return False
    return tty_device(tty_nr) == (os.major(rdev), os.minor(rdev))


def _same_file(a: str, b: str) -> bool:
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
    except BridgeError:
        return None  # no pane there now: nothing runs in it
    fields = out.strip().split("\t")
    if len(fields) != 4 or not fields[1].isdigit():
        return None
    pane_id, pid, tty, server = fields
    return AgentPane(agent_id, pane_id, int(pid), tty, server)
