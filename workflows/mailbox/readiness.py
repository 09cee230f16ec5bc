"""What the mailbox knows of its agent's readiness, in plain Python: when to try typing, how the
pane must look, and what the state becomes as hooks report and the pane is looked at.

The rules of the state itself are in :mod:`agentcomms.agents.state`; this is the mailbox's use of
them, kept apart from the workflow so the delivery loop stays readable.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio.exceptions import ApplicationError

from agentcomms.agents.state import HookReport, Readiness, State, may_type, stale_in
from agentcomms.agents.state import apply as apply_report
from agentcomms.agents.state import submitted as submitted_state
from agentcomms.agents.state import typed as typed_state
from agentcomms.framing import pane_text
from agentcomms.models import Event, EventType, PaneLook, Registration
from workflows.mailbox.models import AgentState

# A pane that did not look ready is looked at again at least this often (a dialog answered, copy
# mode left: neither sends a hook).
NOT_READY_CAP = timedelta(seconds=5)
# At most this many waiting messages typed as one prompt (the queue bounds their text too).
TOGETHER_MAX = 50
# What the state shows when the pane refused a known agent's message, by the bridge's reason. A
# busy marker is not among them: Claude Code's status line lags its Stop hook by a moment, so
# the hook's word stands and the pane is looked at again shortly.
_PANE_SAYS: dict[str, tuple[State, str | None]] = {
    "exited": ("offline", None),
    "copy-mode": ("waiting", "the human (copy mode in the pane)"),
    "dialog": ("waiting", "a dialog in the pane"),
    "draft": ("waiting", "the human (a draft in the input box)"),
}


class Watch:
    """The agent's readiness, kept in the mailbox's state (carried through continue-as-new)."""

    def __init__(self, state: AgentState) -> None:
        self._s = state

    @property
    def now(self) -> Readiness:
        return self._s.readiness

    def report(self, report: HookReport, now: datetime) -> tuple[bool, bool]:
        """Apply a hook's report: (applied, what people see changed)."""
        changed = apply_report(self._s.readiness, report, now)
        if changed is None:
            return False, False
        was, self._s.readiness = self._s.readiness, changed
        return True, (changed.state, changed.waiting_for) != (was.state, was.waiting_for)

    def may_type(self, first: EventType, reg: Registration, now: datetime) -> bool:
        """Whether to try typing the first waiting message (an interrupt goes at once); the
        pane's own look, taken as it is typed, has the last word."""
        if first == "interrupt":
            return True
        return may_type(self._s.readiness, now, reg.deliver)

    def stale_in(self, now: datetime) -> timedelta:
        return max(stale_in(self._s.readiness, now), timedelta(milliseconds=1))

    def look(self, reg: Registration, now: datetime) -> PaneLook:
        """How the pane must look to be typed into. A shell in the foreground is taken for an
        exited agent only once its hooks said it ended: an agent started by `bash -c` keeps
        bash in the pane's foreground all its life (measured with Claude Code), and without
        hooks a plain shell may be what was registered."""
        if reg.deliver == "now":
            return "dialogs"
        r = self._s.readiness
        if r.state == "offline":
            return "ready"
        # A known agent silent for long may have crashed to its shell, with no SessionEnd: the
        # look then asks whether the shell has a program left under it.
        if r.state != "unknown" and stale_in(r, now) <= timedelta(0):
            return "alive"
        return "idle"

    def together(self, reg: Registration) -> bool:
        """Whether what waited is typed as one prompt: an agent whose hooks speak reads it in
        one turn instead of one turn each."""
        return reg.deliver == "when-ready" and self._s.readiness.state != "unknown"

    def typed(self, now: datetime, events: list[Event]) -> bool:
        """Messages were typed: a known agent is busy until its hooks say otherwise, and each
        text awaits its UserPromptSubmit. True when what people see changed."""
        # The agent's prompt carries what was typed: the header and the guttered lines too.
        texts = {e.id: pane_text(e) for e in events if e.type != "interrupt"}
        if not texts:
            return False
        r = self._s.readiness
        self._s.readiness = typed_state(r, now, texts).model_copy(update={"pane": None})
        return self._s.readiness.state != r.state or r.pane is not None

    def pane_refused(self, message: str, cause: BaseException | None, now: datetime) -> bool:
        """The pane did not look ready and nothing was typed. For a known agent the pane
        outranks a hook too old to know (a first-start dialog opens after SessionStart; Esc
        sends nothing): the state shows what the pane showed. True when what people see changed."""
        details = cause.details if isinstance(cause, ApplicationError) else ()
        reason = str(details[0]) if details else "dialog"
        r = self._s.readiness
        # The time of the last report stays: the pane is looked at again as it would have been.
        update: dict[str, object] = {"pane": message}
        if r.state != "unknown" and reason in _PANE_SAYS:
            state, waiting_for = _PANE_SAYS[reason]
            if (state, waiting_for) != (r.state, r.waiting_for):
                update |= {"state": state, "waiting_for": waiting_for, "since": now}
                update["event"] = "pane"
        self._s.readiness = r.model_copy(update=update)
        return r.pane != message or self._s.readiness.state != r.state

    def settled(self, event_id: str, outcome: tuple[str, str | None] | None, asked: bool) -> bool:
        """Whether a `send --wait` has its answer: the message was typed or failed, and when
        `asked`, the agent's prompt carried it too (or that cannot be known)."""
        if outcome is None:
            return False
        return outcome[0] != "delivered" or not asked or self.submitted(event_id) is not False

    def submitted(self, event_id: str) -> bool | None:
        return submitted_state(self._s.readiness, event_id)

    def details(self) -> str:
        """Lines for the Temporal UI's current details."""
        r = self._s.readiness
        line = f"agent: {r.describe()}"
        if r.since is not None:
            line += f" since {r.since.isoformat(timespec='seconds')}"
        if r.state == "unknown":
            line += " (no hook has reported: hooks missing?)"
        if r.pane:
            line += f"\npane: {r.pane}"
        return line
