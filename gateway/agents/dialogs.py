"""Every dialog an agent shows reaches the human, hook or no hook.

An agent asks through its `PermissionRequest` hook, and that request becomes an approval on
every surface. But an agent may ask without any hook: Claude Code in auto mode shows its own
"Do you want to proceed?" and runs none, and a dialog can be any other menu of the agent's. So
every few seconds the panes of the agents whose hooks said "busy" (or "waiting") a while ago are
read (:mod:`agentcomms.bridge.screen_state`, one tmux look each), and a dialog there that no hook
reported is told to the human once: on the agent's chats and in the terminal inbox (the
console's too), with what the dialog says, made visible, and how to answer it. Nothing here
answers a dialog: its keys are the terminal's.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from agentcomms.agents.state import PERMISSION_PROMPT
from agentcomms.bridge.own_dialog import OwnDialog, read_pane
from agentcomms.bridge.screen_state import ScreenCheck, is_doubtful
from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.errors import AgentcommsError
from agentcomms.models import Agent, PaneTarget, utcnow
from agentcomms.store import Store
from agentcomms.visible import visible
from gateway.agents.notices import HumanNotices

if TYPE_CHECKING:
    # Passed in when the watch is built: the approvals' room answers Claude Code's own dialog.
    from gateway.approvals.own_dialogs import OwnDialogs

log = logging.getLogger(__name__)

# How often the panes are looked at, and how long a hook's busy may stand before they are.
EVERY_S = 3.0
UNREPORTED_AFTER = timedelta(seconds=4)
# What a notice quotes of the screen: its last lines, at most this much.
QUOTED_LINES = 14
QUOTED_CHARS = 1200


class DialogWatch:
    """Tells the human of each dialog on an agent's pane that no hook reported, once each; Claude
    Code's own "Do you want to proceed?", read exactly, is opened as an approval instead."""

    def __init__(
        self,
        store: Store,
        notices: HumanNotices,
        screen: ScreenCheck,
        tmux: TmuxAdapter,
        own: OwnDialogs | None = None,
    ) -> None:
        self._store = store
        self._notices = notices
        self._tmux = tmux
        self._screen = screen
        self._own = own
        self._told: set[str] = set()  # agents whose dialog on screen was told

    async def run(self) -> None:
        while True:
            try:
                await self.look_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the projection away a moment: the next look tries again
                log.warning("could not look for dialogs no hook reported: %s", exc)
            await asyncio.sleep(EVERY_S)

    async def look_once(self) -> list[str]:
        """Look at the panes once; the agents whose dialog was told (or asked) now."""
        agents = await self._store.list_agents(include_offline=False)
        now = utcnow()
        seen = await self._screen.confirmed(agents, after=UNREPORTED_AFTER)
        told = []
        for agent in agents:
            on_screen = seen.get(agent.id)
            # A notification says only that a dialog is open (Claude Code sends one for its own
            # too): it is no approval, and the pane is looked at again once it is old.
            notified = agent.state == "waiting" and agent.waiting_for in (None, PERMISSION_PROMPT)
            # A dialog its hooks said nothing of (a reported one is an approval already).
            unreported = (
                on_screen is not None
                and on_screen.state == "waiting"
                and (agent.state != "waiting" or notified)
            )
            if on_screen is None and (notified or is_doubtful(agent, now, UNREPORTED_AFTER)):
                # Not read this time (a notification still fresh, or a pane tmux did not answer
                # for under load): the dialog told or asked stands until the pane is read.
                continue
            if not unreported:
                self._told.discard(agent.id)  # no dialog now: the next one is told again
                if self._own is not None:
                    await self._own.gone(agent.id)
                continue
            own = await self._own_dialog(agent)
            if self._own is not None:
                if own is not None and self._own.is_asked(agent.id, own[1]):
                    continue  # asked as an approval already
                if self._own.asked(agent.id) is not None:
                    await self._own.gone(agent.id)  # another dialog than the one asked
                    self._told.discard(agent.id)
                # Claude Code's own question is news also after a notice (of auto mode's
                # check, which comes before the question for the same call).
                if own is not None:
                    await self._own.ask(agent, *own)
                    self._told.add(agent.id)
                    told.append(agent.id)
                    continue
            if agent.id in self._told:
                continue
            self._told.add(agent.id)
            await self._notices.tell(await self._words(agent), kind="dialog", agent_id=agent.id)
            told.append(agent.id)
        return told

    async def _own_dialog(self, agent: Agent) -> tuple[str, OwnDialog] | None:
        """The pane's id and Claude Code's own dialog on it, when it shows one exactly."""
        if self._own is None or agent.target is None:
            return None
        pane = PaneTarget(target=agent.target, socket=agent.tmux_socket)
        try:
            pane_id, dialog = await read_pane(self._tmux, pane)
        except AgentcommsError:
            return None
        return None if dialog is None else (pane_id, dialog)

    async def _words(self, agent: Agent) -> str:
        assert agent.target is not None
        try:
            screen = await self._tmux.screen(
                PaneTarget(target=agent.target, socket=agent.tmux_socket)
            )
        except AgentcommsError:
            screen = ""
        lines = [line.rstrip() for line in screen.splitlines() if line.strip()]
        quoted = visible("\n".join(lines[-QUOTED_LINES:]))[-QUOTED_CHARS:]
        return (
            f"{agent.id} shows a dialog that no hook reported, so it is not an approval here: "
            f"answer it in its terminal (tmux pane {agent.target}). Claude Code asks this way "
            "in auto mode; `agentcomms install claude-code --permission-mode default` sends its "
            "requests here instead.\n\n" + quoted
        )
