"""What an agent's state is, as its pane shows it: for a state no hook has confirmed lately.

Hooks say what an agent does, but not everything: Claude Code in auto mode shows its own
"Do you want to proceed?" with no hook at all, and Esc on a dialog sends none, so a state set by
the last hook can stay "busy" under an open dialog, or "waiting" over an empty prompt, for as
long as nobody types. Before such a state is shown (`agents`, `status`, the console, MCP), the
pane is read (one tmux invocation, the same look the delivery takes) and what it shows stands,
saying when it was confirmed. A look is kept a few seconds, so a console polling every agent
costs at most one invocation per stale agent per :data:`LOOK_KEPT_S`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from agentcomms.agents.state import STALE_AFTER
from agentcomms.bridge.checks import no_server_at
from agentcomms.bridge.look import PaneInfo, crashed_to_shell
from agentcomms.errors import PaneNotFound, TmuxError
from agentcomms.models import Agent, PaneTarget, utcnow

# How long one look at a pane is shown for before it is taken again.
LOOK_KEPT_S = 3.0
# The states the pane can contradict: those hooks set and no hook may undo (Esc sends none).
_DOUBTFUL = frozenset({"busy", "waiting"})


class Looker(Protocol):
    """What :class:`ScreenCheck` needs of the tmux bridge: one look at a pane."""

    async def pane_info(self, pane: PaneTarget) -> PaneInfo: ...


@dataclass(frozen=True)
class OnScreen:
    """An agent's state read off its pane, and when."""

    state: str
    waiting_for: str | None
    at: datetime


def state_on_screen(info: PaneInfo, at: datetime) -> OnScreen:
    """What the pane's markers say the agent is doing (a live pane)."""
    if crashed_to_shell(info.command, info.pid) is not None:
        return OnScreen("offline", None, at)
    if info.dialog:
        return OnScreen("waiting", "a dialog on screen (answer it in the terminal)", at)
    if info.busy:
        return OnScreen("busy", None, at)
    return OnScreen("ready", None, at)


def is_doubtful(agent: Agent, now: datetime, after: timedelta = STALE_AFTER) -> bool:
    """Whether `agent`'s state is one a look at its pane should confirm before it is shown: a
    busy or waiting its hooks set at least `after` ago."""
    if agent.state not in _DOUBTFUL or agent.target is None or agent.type != "tmux":
        return False  # a process agent's state comes from its ACP stream: exact, no screen
    since = agent.state_since
    return since is None or now - since >= after


class ScreenCheck:
    """Confirms doubtful states against the panes this host can read, a look kept a while."""

    def __init__(self, look: Looker, host: str) -> None:
        self._look = look
        self._host = host
        self._kept: dict[tuple[str | None, str], tuple[float, OnScreen]] = {}

    async def confirmed(
        self, agents: list[Agent], *, after: timedelta = STALE_AFTER
    ) -> dict[str, OnScreen]:
        """What the panes show of the agents whose state is doubtful (set `after` ago or
        more), by agent id: those on this host whose pane could be read."""
        now = utcnow()
        doubtful = [
            a
            for a in agents
            if is_doubtful(a, now, after) and (a.host is None or a.host == self._host)
        ]
        looks = await asyncio.gather(*(self._looked(a) for a in doubtful))
        return {a.id: seen for a, seen in zip(doubtful, looks, strict=True) if seen is not None}

    async def _looked(self, agent: Agent) -> OnScreen | None:
        assert agent.target is not None
        key = (agent.tmux_socket, agent.target)
        kept = self._kept.get(key)
        if kept is not None and time.monotonic() - kept[0] < LOOK_KEPT_S:
            return kept[1]
        try:
            info = await self._look.pane_info(
                PaneTarget(target=agent.target, socket=agent.tmux_socket)
            )
            seen = state_on_screen(info, utcnow())
        except PaneNotFound:
            seen = OnScreen("offline", None, utcnow())
        except TmuxError:
            if agent.tmux_socket is None or not no_server_at(agent.tmux_socket):
                return None  # a server this process may not read: the hooks' word stands
            seen = OnScreen("offline", None, utcnow())
        self._kept[key] = (time.monotonic(), seen)
        return seen


def shown_for(agent: Agent, seen: OnScreen | None) -> tuple[str, str | None, datetime | None]:
    """The state to show for `agent` (its hooks', or its pane's where read), what it waits for,
    and when it was last confirmed (None: by its hooks, when they set it)."""
    if seen is None:
        return agent.state, agent.waiting_for, agent.state_since
    if seen.state == agent.state and agent.state == "waiting":
        return agent.state, agent.waiting_for, seen.at  # the hook's words say more
    return seen.state, seen.waiting_for, seen.at
