"""Claude Code's own "Do you want to proceed?" answered from any surface, as an approval.

In auto mode Claude Code asks in a dialog of its own and runs no hook. Where the dialogs' watch
(:mod:`gateway.agents.dialogs`) reads one exactly (:mod:`agentcomms.bridge.own_dialog`), it is
opened as an approval of the agent's: every surface shows what the dialog shows, and it is
answered as any approval is, by the agent's approvers and never from an agent's pane, through
the one answer path. What the answer does is read back as a hook reads it, from what the
deployment signed alone (:func:`gateway.approvals.decision.hook_decision`); its keys are then
pressed here, each checked by tmux against the screen as it is pressed. A dialog that changed
meanwhile gets no key, and the human is told to answer it in the terminal; one that left the
screen before an answer came was answered there. Esc cancels the call and interrupts the turn,
and Claude Code then asks "What should Claude do instead?": a denial's words go there, as the
human's next message through the agent's mailbox, since the dialog has no place for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from agentcomms.approval_models import ApprovalRequest, Decision
from agentcomms.bridge.own_dialog import OwnDialog, press_once, read_pane
from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.config import Config
from agentcomms.errors import AgentcommsError
from agentcomms.ids import new_event_id
from agentcomms.models import LOCAL_CHANNEL, Agent, Event, PaneTarget
from agentcomms.trust import DeploymentKey
from gateway.agents.notices import HumanNotices
from gateway.approvals.asks import INPUT_CHARS, shown_visibly
from gateway.approvals.decision import hook_decision
from gateway.approvals.methods import ApprovalMethods

log = logging.getLogger(__name__)

# How long each wait for the answer lasts before it is asked again.
WAIT_S = 60.0
# Keys towards one answer (Down as often as there are options, then Enter), and the pause
# between looks at the pane for Claude Code to draw the pointer where it moved.
PRESSES = 8
PRESS_PAUSE_S = 0.2
# How long a moved pointer may take to show (a loaded machine); then the key is pressed again.
MOVE_WAIT_S = 3.0


class OwnDialogs:
    """The approvals opened for agents' own dialogs, one per agent at a time."""

    def __init__(
        self,
        cfg: Config,
        approvals: ApprovalMethods,
        key: DeploymentKey,
        tmux: TmuxAdapter,
        notices: HumanNotices,
        post: Callable[[Event], Awaitable[object]],
    ) -> None:
        self._cfg = cfg
        self._approvals = approvals
        self._key = key
        self._tmux = tmux
        self._notices = notices
        self._post = post  # into an agent's mailbox
        # agent id -> (approval id, the dialog, the task that waits for its answer and presses it)
        self._asked: dict[str, tuple[str, OwnDialog, asyncio.Task[None]]] = {}
        self._pressing: set[str] = set()  # approvals whose answer is being pressed

    async def ask(self, agent: Agent, pane_id: str, dialog: OwnDialog) -> str:
        """Open the dialog on `agent`'s pane as an approval; its id."""
        assert agent.target is not None
        tool = shown_visibly(dialog.title, 200)
        shown = shown_visibly(dialog.shown, INPUT_CHARS)
        approval_id = await self._approvals.open_read(
            ApprovalRequest(
                id="",
                agent_id=agent.id,
                tool=tool.text,
                input_text=shown.text,
                whole=not (tool.truncated or shown.truncated),
                timeout_s=self._cfg.approvals.timeout_s,
                on_timeout=self._cfg.approval_on_timeout(agent.id),
            )
        )
        pane = PaneTarget(target=agent.target, socket=agent.tmux_socket)
        answering = asyncio.create_task(self._answer(approval_id, agent.id, pane, pane_id, dialog))
        self._asked[agent.id] = (approval_id, dialog, answering)
        return approval_id

    def asked(self, agent_id: str) -> str | None:
        """The approval opened for the dialog on `agent_id`'s pane while it is there (answered
        or not: the same dialog is not asked twice)."""
        asked = self._asked.get(agent_id)
        return asked[0] if asked is not None else None

    def is_asked(self, agent_id: str, dialog: OwnDialog) -> bool:
        """Whether `dialog` is the one asked for `agent_id` (its pointer aside)."""
        asked = self._asked.get(agent_id)
        return asked is not None and asked[1].pins == dialog.pins

    async def gone(self, agent_id: str) -> None:
        """The dialog left `agent_id`'s screen: answered in the terminal, unless its answer from
        a surface is what closed it."""
        asked = self._asked.pop(agent_id, None)
        if asked is None:
            return
        approval_id, _, answering = asked
        if answering.done() or approval_id in self._pressing:
            return
        answering.cancel()
        closed = Decision(
            approval_id=approval_id, behavior="terminal", by="the terminal", via="terminal"
        )
        try:
            await self._approvals.decide(closed)
        except Exception:
            log.exception(
                "approval %s: could not close it as answered in the terminal", approval_id
            )

    async def close(self) -> None:
        tasks = [task for _, _, task in self._asked.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _answer(
        self, approval_id: str, agent_id: str, pane: PaneTarget, pane_id: str, dialog: OwnDialog
    ) -> None:
        view = None
        while view is None:
            view = await self._approvals.wait_decided(approval_id, WAIT_S)
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # Temporal's client answers a cancelled wait as one that timed out: stop here.
                raise asyncio.CancelledError
        decision = hook_decision(self._key, view, approval_id)
        if decision is None:
            return  # left to the terminal: answered there, or nobody answered in time
        self._pressing.add(approval_id)
        try:
            pressed = await self._press(
                pane, pane_id, dialog, allow=decision["behavior"] == "allow"
            )
        except AgentcommsError as exc:
            log.warning("approval %s: could not press its answer: %s", approval_id, exc)
            pressed = False
        finally:
            self._pressing.discard(approval_id)
        message = view.decision.message if view.decision is not None else None
        if pressed and decision["behavior"] == "deny" and message:
            by = view.decision.by if view.decision is not None else "the human"
            said = {"text": message, "source": "approval", "sender_name": by}
            try:
                await self._post(
                    Event(
                        id=new_event_id(),
                        agent_id=agent_id,
                        channel_id=LOCAL_CHANNEL,
                        type="human_message",
                        role="human",
                        payload=said,
                    )
                )
            except AgentcommsError as exc:  # its mailbox full: the denial stands, its words not
                log.warning(
                    "approval %s: the denial's words could not be sent: %s", approval_id, exc
                )
        if not pressed:
            await self._notices.tell(
                f"{agent_id}'s dialog changed before the answer to approval {approval_id} could "
                f"be pressed, so nothing was pressed: answer it in its terminal (tmux pane "
                f"{pane.target}).",
                kind="dialog",
                agent_id=agent_id,
            )

    async def _press(
        self, pane: PaneTarget, pane_id: str, dialog: OwnDialog, *, allow: bool
    ) -> bool:
        """Press the keys of the answer, each only while the pane shows `dialog`; whether the
        last one (Enter or Esc) was pressed."""
        pointer = dialog.pointer
        for _ in range(PRESSES):
            key = await press_once(self._tmux, pane.socket, pane_id, dialog, allow=allow)
            if key in ("Enter", "Escape"):
                return True
            # Down or Up: the next key waits until the pointer shows where it went, so a slow
            # redraw never has a key pressed twice. None: only a redraw may be pressed again.
            moved = await self._redrawn(pane, pane_id, dialog, pointer, moving=key is not None)
            if moved is None:
                return False
            pointer = moved
        return False

    async def _redrawn(
        self, pane: PaneTarget, pane_id: str, dialog: OwnDialog, pointer: int, *, moving: bool
    ) -> int | None:
        """Where the pointer of `dialog` is once the pane shows it moved from `pointer` (or,
        not `moving`, at once); None when the pane shows another dialog, or none."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MOVE_WAIT_S
        while True:
            await asyncio.sleep(PRESS_PAUSE_S)
            now_id, now = await read_pane(self._tmux, pane)
            if now_id != pane_id or now is None or now.pins != dialog.pins:
                return None
            if not moving or now.pointer != pointer or loop.time() > deadline:
                return now.pointer
