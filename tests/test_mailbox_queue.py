"""The mailbox's queue and what it owes the projection, as plain Python: no Temporal, no tmux.

These rules are what the workflow does with every message, so they are checked here in
milliseconds; the mailbox tests check the same rules end to end, through a real server and pane.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentcomms.models import TRIES_KEPT, Agent, Event
from tests.support.events import message
from workflows.mailbox.models import AgentState
from workflows.mailbox.projection import CARRIED_CHARS, CHUNK_CHARS, RETRY_CAP, Owed, chunks
from workflows.mailbox.queue import (
    BATCH_TEXT_CHARS,
    BURST_HOLD_MS,
    HARD_WAITING_CAP,
    INLINE_WAITING,
    INTERRUPT_LIFETIME,
    OUTCOMES_KEPT,
    SEEN_IDS_KEPT,
    Queue,
    expired_interrupt,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def event(event_id: str, text: str = "hi", kind: str = "human_message") -> Event:
    role = "human" if kind == "human_message" else "system"
    return message("a", "cli:local", text, id=event_id, type=kind, role=role, created_at=NOW)


def queue_of(*events: Event) -> Queue:
    queue = Queue(AgentState(agent_id="a"))
    for e in events:
        assert queue.add(e) is None
    return queue


def order(state: AgentState) -> list[str]:
    return [w.id for w in state.waiting]


def test_messages_wait_in_order_and_an_interrupt_overtakes_them_but_not_earlier_interrupts() -> (
    None
):
    state = AgentState(agent_id="a")
    queue = Queue(state)
    for e in (event("m1"), event("m2"), event("i1", kind="interrupt"), event("m3")):
        queue.add(e)
    queue.add(event("i2", kind="interrupt"))
    assert order(state) == ["i1", "i2", "m1", "m2", "m3"]
    assert queue.position("m1") == 3 and queue.position("gone") is None


def test_an_interrupt_is_pressed_only_within_its_lifetime_and_a_message_waits_for_ever() -> None:
    interrupt, text = event("i1", kind="interrupt"), event("m1")
    soon, late = NOW + INTERRUPT_LIFETIME, NOW + INTERRUPT_LIFETIME + timedelta(seconds=1)
    assert not expired_interrupt(interrupt, soon)
    assert expired_interrupt(interrupt, late)
    assert not expired_interrupt(text, NOW + timedelta(days=30))


def test_an_id_seen_is_remembered_across_continue_as_new_and_trimmed_to_the_latest() -> None:
    state = AgentState(agent_id="a")
    queue = Queue(state)
    for i in range(SEEN_IDS_KEPT * 2 + 1):
        queue.remember(f"e{i}")
    assert len(state.seen_ids) == SEEN_IDS_KEPT
    assert queue.seen(f"e{SEEN_IDS_KEPT * 2}") and not queue.seen("e0")
    next_run = Queue(AgentState.model_validate(state.model_dump()))
    assert next_run.seen(f"e{SEEN_IDS_KEPT * 2}")


def test_past_the_hard_cap_a_message_is_refused_with_the_reason() -> None:
    state = AgentState(agent_id="a")
    queue = Queue(state)
    for i in range(HARD_WAITING_CAP):
        assert queue.add(event(f"m{i}")) is None
    refused = queue.add(event("one-too-many"))
    assert refused == f"mailbox full: {HARD_WAITING_CAP} messages wait already"
    assert len(queue) == HARD_WAITING_CAP and queue.position("one-too-many") is None


def test_a_batch_takes_the_held_messages_behind_the_first_up_to_room_and_text() -> None:
    queue = queue_of(*(event(f"m{i}") for i in range(10)), event("i1", kind="interrupt"))
    first = queue.held(queue.first().id)
    assert first is not None and first.id == "i1"
    assert queue.behind(first, room=5) == []  # an interrupt goes alone
    queue.settle("i1", "delivered")
    first = queue.held(queue.first().id)
    assert first is not None
    assert [e.id for e in queue.behind(first, room=3)] == ["m1", "m2", "m3"]
    long = queue_of(event("l0", "x" * 100), event("l1", "x" * BATCH_TEXT_CHARS), event("l2"))
    held = long.held("l0")
    assert held is not None and long.behind(held, room=5) == []  # past the text bound


def test_only_a_batch_that_took_a_whole_burst_holds_its_workflow_task() -> None:
    lone = queue_of(event("m0"))
    assert lone.hold_after([event("m0")]) == 0  # how people and agents write: never held
    burst = queue_of(event("b0"), event("b1"))
    assert burst.hold_after([event("b0"), event("b1")]) == BURST_HOLD_MS
    # A backlog's next batch is typed in the same task at once: nothing to wait for.
    backlog = queue_of(*(event(f"q{i}") for i in range(5)))
    assert backlog.hold_after([event("q0"), event("q1")]) == 0


def test_a_batch_stops_at_a_message_whose_text_this_run_does_not_hold() -> None:
    state = AgentState(agent_id="a")
    queue = Queue(state)
    queue.add(event("m0"))
    queue.add(event("m1"))
    # A next run holds only what the state handed over: here nothing (the texts live in the
    # projection), so it reads them back before typing.
    next_run = Queue(AgentState.model_validate(state.model_dump()))
    assert next_run.without_text(10) == ["m0", "m1"]
    next_run.hold(event("m0"))
    held = next_run.held("m0")
    assert held is not None and next_run.behind(held, room=5) == []


def test_settling_remembers_the_outcome_and_its_note_and_forgets_the_oldest() -> None:
    queue = queue_of(event("m0"), event("m1"))
    queue.record_try("m1", NOW, "pane gone")
    queue.settle("m1", "delivered", note="cut")  # by id, though not first
    assert queue.outcome("m1") == ("delivered", "cut")
    assert queue.tries("m1") == [] and queue.position("m0") == 1
    for i in range(OUTCOMES_KEPT):
        queue.add(event(f"x{i}"))
        queue.settle(f"x{i}", "failed")
    assert queue.outcome("m1") is None and queue.outcome(f"x{OUTCOMES_KEPT - 1}") == (
        "failed",
        None,
    )


def test_only_the_latest_tries_are_kept() -> None:
    queue = queue_of(event("m0"))
    for i in range(TRIES_KEPT + 5):
        queue.record_try("m0", NOW, f"try {i}")
    tries = queue.tries("m0")
    assert len(tries) == TRIES_KEPT and tries[0].error == "try 5"


def test_few_short_texts_are_handed_over_in_the_state_and_many_through_the_projection() -> None:
    few = queue_of(*(event(f"m{i}") for i in range(3)))
    assert few.hand_over() == []
    assert [w.event.id for w in few._s.waiting if w.event] == ["m0", "m1", "m2"]
    many = queue_of(*(event(f"m{i}") for i in range(INLINE_WAITING + 1)))
    handed = many.hand_over()
    assert len(handed) == INLINE_WAITING + 1 and all(w.event is None for w in many._s.waiting)


def test_what_is_owed_goes_in_bounded_chunks_with_the_agent_row_last() -> None:
    owed = Owed([])
    owed.events = [event(f"e{i}", "x" * 40_000) for i in range(8)]
    owed.agent = Agent(id="a", status="online")
    written = []
    while owed:
        events, agent = owed.take()
        owed.written()
        written.append((len(events), agent is not None))
    assert sum(n for n, _ in written) == 8 and len(written) > 1
    assert [row for _, row in written] == [False] * (len(written) - 1) + [True]
    assert all(sum(len(e.text) for e in c) <= CHUNK_CHARS for c in chunks(owed.events))


def test_a_failed_write_is_kept_whole_and_retried_later_with_capped_backoff() -> None:
    owed = Owed([event("carried")])
    owed.events.append(event("e1"))
    owed.agent = Agent(id="a", status="unreachable")
    owed.take()
    owed.agent = Agent(id="a", status="online")  # settled while the write ran
    owed.events.append(event("e2"))
    assert owed.unrecorded() == 3
    owed.put_back()
    assert [e.id for e in owed.events] == ["carried", "e1", "e2"]
    assert owed.agent.status == "online"  # the newer row wins
    waits = [owed.next_backoff() for _ in range(10)]
    assert waits[0].total_seconds() == 1 and waits[-1] == RETRY_CAP
    owed.written()
    assert owed.next_backoff().total_seconds() == 1


def test_what_the_projection_could_not_take_is_carried_by_the_next_run_up_to_a_bound() -> None:
    owed = Owed([])
    owed.events = [event("e0", "x" * 100)]
    assert [e.id for e in owed.carried()] == ["e0"]
    owed.events.append(event("e1", "x" * CARRIED_CHARS))
    assert owed.carried() == []  # too much to carry: the run waits for the projection
