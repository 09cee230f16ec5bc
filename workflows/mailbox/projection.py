"""What a mailbox still owes the projection, in plain Python: settled events and its agent row.

The rule: **typing never waits for the projection.** Temporal's history is the source of truth;
the projection is a copy that may lag.
- A write runs beside the typing, one at a time, so rows land in the order they settled. It
  starts when the mailbox says the owed rows are due: after about half a second of typing, when
  the queue drains, when what the agent row shows changes. So a backlog costs about one write
  per batch, not one per message.
- A write is a local activity given ``MAILBOX_RECORD_TIMEOUT`` (a write takes milliseconds): a local
  activity holds the workflow task open, and with it every signal that arrives meanwhile.
- A write that fails (PostgreSQL down, a locked SQLite file) is kept, whole, and tried again after
  a backoff (1 s, doubling to 60 s): an outage costs the history one failed write per backoff,
  not one per message, holds new messages back at most that timeout per backoff, and the
  rows catch up once the database is back. Every write is idempotent.
- While writes fail, a delivery no longer records itself: the mailbox's writes carry its rows.
- Before continuing-as-new the mailbox writes what it owes; what the projection still cannot take
  travels in the next run's state, up to ``CARRIED_CHARS`` of text, and past that the mailbox waits
  for the projection (only a long outage under a heavy flow gets there).
- The one thing that does wait: a backlog too large to carry in the state is written to the
  projection before continuing-as-new and read back from it by the next run as it types.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from agentcomms.models import Agent, Event, Try
from workflows.mailbox.models import AgentSnapshot, AgentState, MailboxAccount

# A projection write carries at most about this many characters of message text: with JSON's worst
# case (6 bytes for an escaped character) and one whole message at the cap, a payload stays well
# under the server's 2 MB.
CHUNK_CHARS = 150_000
# What the next run may carry of events the projection could not take yet.
CARRIED_CHARS = 100_000
RETRY_FIRST = timedelta(seconds=1)
RETRY_CAP = timedelta(seconds=60)


class Owed:
    def __init__(self, carried: list[Event]) -> None:
        self.events: list[Event] = list(carried)
        self.agent: Agent | None = None
        # The status and waiting count the agent row last showed (or will, once written).
        self.shown: tuple[str, int] | None = None
        self.backoff = RETRY_FIRST
        self.failing = False  # the last write failed; the next waits for the backoff
        self.writing: tuple[list[Event], Agent | None] | None = None  # the write under way
        self.due = bool(carried)  # what is owed is to be written now

    def __bool__(self) -> bool:
        """Whether there is something to write (besides the write under way)."""
        return bool(self.events) or self.agent is not None

    def owe(self, event: Event) -> None:
        self.events.append(event)

    def flush(self) -> None:
        """Write what is owed now (it waits, otherwise, for the next flush)."""
        self.due = True

    def unrecorded(self) -> int:
        """Settled events the projection has not taken yet, the write under way included."""
        return len(self.events) + (len(self.writing[0]) if self.writing else 0)

    def take(self) -> tuple[list[Event], Agent | None]:
        """The next write: a chunk of the owed events, and the agent row with the last chunk."""
        chunk = next(iter(chunks(self.events)), [])
        self.events = self.events[len(chunk) :]
        agent = None
        if not self.events:
            agent, self.agent = self.agent, None
            self.due = False
        self.writing = (chunk, agent)
        return chunk, agent

    def put_back(self) -> None:
        """The write under way failed: its rows go first next time (a newer agent row wins)."""
        assert self.writing is not None
        events, agent = self.writing
        self.writing = None
        self.events[:0] = events
        if self.agent is None:
            self.agent = agent
        self.failing = True
        self.due = True

    def written(self) -> None:
        self.writing = None
        self.failing = False
        self.backoff = RETRY_FIRST

    def next_backoff(self) -> timedelta:
        backoff = self.backoff
        self.backoff = min(self.backoff * 2, RETRY_CAP)
        return backoff

    def carried(self) -> list[Event]:
        """What the next run takes along, when the projection could not take it now."""
        return self.events if sum(len(e.text) for e in self.events) <= CARRIED_CHARS else []


def chunks(events: list[Event]) -> list[list[Event]]:
    """Split events into runs whose texts add up to about CHUNK_CHARS (one event at least)."""
    runs: list[list[Event]] = []
    size = 0
    for event in events:
        cost = len(event.text) + 500  # the rest of the row, roughly
        if not runs or size + cost > CHUNK_CHARS:
            runs.append([])
            size = 0
        runs[-1].append(event)
        size += cost
    return runs


def agent_row(state: AgentState, waiting: int, now: datetime) -> Agent:
    """The agent as the projection shows it (`agents`): the mailbox's state, summed up."""
    reg = state.registration
    return Agent(
        id=state.agent_id,
        type=reg.type if reg else "tmux",
        target=reg.target if reg else None,
        tmux_socket=reg.socket if reg else None,
        host=reg.host if reg else None,
        interrupt_key=reg.interrupt_key if reg else "C-c",
        submit_delay_ms=reg.submit_delay_ms if reg else 150,
        status=state.status,
        pending=waiting,
        last_delivered_event_id=state.last_delivered_event_id,
        last_error=state.last_error,
        updated_at=now,
        state=state.readiness.state,
        waiting_for=state.readiness.waiting_for,
        state_since=state.readiness.since,
        pane_changed_at=state.pane_changed_at,
    )


def settled_event(
    event: Event,
    outcome: str,
    now: datetime,
    tries: list[Try],
    error: str | None = None,
    note: str | None = None,
) -> Event:
    """The event as the projection shows it once settled."""
    return event.model_copy(
        update={
            "status": outcome,
            "attempts": event.attempts + 1,
            "delivered_at": now if outcome == "delivered" else None,
            "error": error,
            "note": note,
            "tries": tries,
        }
    )


def snapshot(state: AgentState, waiting: int, unrecorded: int) -> AgentSnapshot:
    """What the `state` query answers."""
    return AgentSnapshot(
        agent_id=state.agent_id,
        status=state.status,
        registration=state.registration,
        pending=waiting,
        last_delivered_event_id=state.last_delivered_event_id,
        last_error=state.last_error,
        unreachable_since=state.unreachable_since,
        delivered_count=state.delivered_count,
        unrecorded=unrecorded,
        readiness=state.readiness,
        refused_reports=state.refused_reports,
        last_refused_report=state.last_refused_report,
    )


def account(state: AgentState, owed: Owed, now: datetime) -> MailboxAccount:
    """What the `account` query answers: the projection's part of the mailbox, now."""
    writing = owed.writing[0] if owed.writing else []
    return MailboxAccount(
        agent=agent_row(state, len(state.waiting), now),
        waiting=[w.id for w in state.waiting],
        outcomes=dict(state.outcomes),
        notes=dict(state.notes),
        unrecorded=[*writing, *owed.events],
    )
