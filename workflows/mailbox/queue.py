"""The waiting messages of one agent, in plain Python: no Temporal, no I/O.

The rules of the queue live here, where unit tests reach them in milliseconds:
- FIFO, except that an interrupt overtakes queued messages (but not earlier interrupts);
- an interrupt is for the moment it was sent: one not pressed within ``INTERRUPT_LIFETIME``
  (its pane was missing, its host's worker down, the agent not registered) is never pressed,
  and fails saying so;
- an event id is accepted once (providers re-send messages; the memory of ids is carried across
  continue-as-new and trimmed to the latest ``SEEN_IDS_KEPT``);
- past ``HARD_WAITING_CAP`` messages a new one is refused, never dropped silently;
- what may be typed together with the first message (a batch), bounded in count and text;
- a batch that took a burst (two or more messages, all that waited) holds its workflow task
  ``BURST_HOLD_MS`` longer, so that the burst's next messages join it;
- the outcome of each settled message, remembered for a while for a waiting `send --wait`.

The queue works on the mailbox's state (:class:`AgentState`), which carries each waiting message's
id and kind but not its text; the texts this run holds are kept beside it, in memory.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypeVar

from agentcomms.limits import INTERRUPT_LIFETIME_S
from agentcomms.models import TRIES_KEPT, Event, Try
from workflows.mailbox.models import AgentState, Outcome, Waiting

# How many recently seen event ids to remember for de-duplication.
SEEN_IDS_KEPT = 2000
# How many recent outcomes to remember so a waiting `send --wait` can learn what happened.
OUTCOMES_KEPT = 500
# Past this many waiting messages the mailbox refuses more (recorded as rejected, never typed).
# The gateway refuses far earlier, at the configured per-agent limit; this is the backstop for
# signals that went around it, and keeps the continue-as-new input under the payload limit.
HARD_WAITING_CAP = 12_000  # about 75 bytes each in the state: under 1 MB
# Pressed later (the pane came back, the host's worker restarted), an interrupt would stop
# whatever the agent does then, not what the human saw it doing.
INTERRUPT_LIFETIME = timedelta(seconds=INTERRUPT_LIFETIME_S)
INTERRUPT_EXPIRED = (
    f"not pressed: the pane could not be reached within {INTERRUPT_LIFETIME_S} s of the "
    "interrupt, and by now it would stop whatever the agent does next; interrupt again if it "
    "still should stop"
)
# At most this much text is typed in one batch.
BATCH_TEXT_CHARS = 20_000
# A workflow task is the Temporal server's main cost per message (on the dev server, about
# 2.8 ms of its CPU each, a signal 1.8 ms), and a signal that comes while one is open joins it.
# Typing a batch ends the task within a few milliseconds, so in a burst most messages
# started a task of their own (0.62-0.67 per message, 5 agents each sent one after another). A
# batch of a burst therefore keeps its task this much longer once typed: the burst's next message
# waits at most this, and 0.41-0.46 tasks per message are left. One message alone, which is how
# people and agents write, is never held.
BURST_HOLD_MS = 20
# A few short waiting texts travel in the continue-as-new state; more go through the projection.
INLINE_TEXT_CHARS = 50_000  # with JSON's worst case, about 300 KB of state
INLINE_WAITING = 200


def expired_interrupt(event: Event, now: datetime) -> bool:
    """Whether `event` is an interrupt too old to press."""
    return event.type == "interrupt" and now - event.created_at > INTERRUPT_LIFETIME


class Queue:
    def __init__(self, state: AgentState) -> None:
        self._s = state
        self._seen = set(state.seen_ids)
        # The texts of waiting messages this run holds: those it received (its history has them
        # too), those handed over in the state, and those read back from the projection.
        self._texts: dict[str, Event] = {}
        for entry in state.waiting:
            if entry.event is not None:
                self._texts[entry.id] = entry.event
                entry.event = None

    def __len__(self) -> int:
        return len(self._s.waiting)

    # ---- arriving ------------------------------------------------------------------------------

    def seen(self, event_id: str) -> bool:
        return event_id in self._seen

    def remember(self, event_id: str) -> None:
        """Remember the id as seen: a message (or unregister) with it is not taken again."""
        self._seen.add(event_id)
        self._s.seen_ids.append(event_id)
        if len(self._s.seen_ids) > SEEN_IDS_KEPT * 2:
            # Trim in batches so the list stays cheap to maintain.
            drop = self._s.seen_ids[: len(self._s.seen_ids) - SEEN_IDS_KEPT]
            self._s.seen_ids = self._s.seen_ids[-SEEN_IDS_KEPT:]
            self._seen.difference_update(drop)

    def add(self, event: Event) -> str | None:
        """Queue the event; the reason it was refused instead, when the queue is full."""
        waiting = self._s.waiting
        if len(waiting) >= HARD_WAITING_CAP:
            return f"mailbox full: {len(waiting)} messages wait already"
        self._texts[event.id] = event
        entry = Waiting(id=event.id, type=event.type)
        if event.type == "interrupt":
            index = next((i for i, w in enumerate(waiting) if w.type != "interrupt"), len(waiting))
            waiting.insert(index, entry)
        else:
            waiting.append(entry)
        return None

    # ---- typing ---------------------------------------------------------------------------------

    def first(self) -> Waiting:
        return self._s.waiting[0]

    def held(self, event_id: str) -> Event | None:
        return self._texts.get(event_id)

    def hold(self, event: Event) -> None:
        """Keep a waiting message's text read back from the projection."""
        self._texts[event.id] = event

    def without_text(self, limit: int) -> list[str]:
        """The first waiting ids whose texts this run does not hold, in order."""
        return [w.id for w in self._s.waiting if w.id not in self._texts][:limit]

    def behind(self, first: Event, *, room: int) -> list[Event]:
        """The messages waiting right behind `first` that may be typed with it: held here, no
        interrupt among them, at most `room` more and ``BATCH_TEXT_CHARS`` of text in all."""
        if first.type == "interrupt":
            return []
        chars = len(first.text)
        batch: list[Event] = []
        for entry in self._s.waiting[1 : 1 + max(room, 0)]:
            event = self._texts.get(entry.id)
            if event is None or event.type == "interrupt":
                break
            chars += len(event.text)
            if chars > BATCH_TEXT_CHARS:
                break
            batch.append(event)
        return batch

    def hold_after(self, batch: list[Event]) -> int:
        """How long the workflow task that types `batch` stays open once it is typed (ms)."""
        return BURST_HOLD_MS if len(batch) >= 2 and len(batch) == len(self) else 0

    def record_try(self, event_id: str, at: datetime, error: str) -> list[Try]:
        tries = self._s.tries.setdefault(event_id, [])
        tries.append(Try(at=at, error=error))
        del tries[:-TRIES_KEPT]
        return tries

    def tries(self, event_id: str) -> list[Try]:
        return self._s.tries.get(event_id, [])

    def settle(self, event_id: str, outcome: Outcome, *, note: str | None = None) -> None:
        """Take the message out of the queue and remember what became of it."""
        waiting = self._s.waiting
        # By id, not position: an interrupt may have been queued ahead of it meanwhile.
        if waiting and waiting[0].id == event_id:
            waiting.pop(0)
        else:
            self._s.waiting = [w for w in waiting if w.id != event_id]
        self._texts.pop(event_id, None)
        self._s.tries.pop(event_id, None)
        _keep_recent(self._s.outcomes, event_id, outcome)
        if note is not None:
            _keep_recent(self._s.notes, event_id, note)

    # ---- asking ---------------------------------------------------------------------------------

    def outcome(self, event_id: str) -> tuple[Outcome, str | None] | None:
        outcome = self._s.outcomes.get(event_id)
        return None if outcome is None else (outcome, self._s.notes.get(event_id))

    def position(self, event_id: str) -> int | None:
        """1 for the next message typed; None once it no longer waits."""
        for i, entry in enumerate(self._s.waiting):
            if entry.id == event_id:
                return i + 1
        return None

    # ---- continuing as new ---------------------------------------------------------------------

    def hand_over(self) -> list[Event]:
        """Prepare the state for the next run: the waiting texts go in it when few and short
        (none returned); otherwise they are returned, to be written to the projection first."""
        held = [self._texts[w.id] for w in self._s.waiting if w.id in self._texts]
        self._s.seen_ids = self._s.seen_ids[-SEEN_IDS_KEPT:]
        if len(held) <= INLINE_WAITING and sum(len(e.text) for e in held) <= INLINE_TEXT_CHARS:
            for entry in self._s.waiting:
                entry.event = self._texts.get(entry.id)
            return []
        return held


V = TypeVar("V", bound=str)


def _keep_recent(memory: dict[str, V], event_id: str, value: V) -> None:
    """Remember `value` for `event_id`, forgetting the oldest past OUTCOMES_KEPT."""
    memory[event_id] = value
    while len(memory) > OUTCOMES_KEPT:
        memory.pop(next(iter(memory)))
