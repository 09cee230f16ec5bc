"""What changed in the projection, as the console reads it for every open page at once: agents
written since a time, events after a place in the order, each agent's newest event (SQLite, and
PostgreSQL when AGENTCOMMS_TEST_DATABASE_URL is set)."""

from __future__ import annotations

from datetime import timedelta

from agentcomms.models import Agent, utcnow
from agentcomms.store import Store
from tests.support.events import message


async def test_agents_written_since_a_time_and_nothing_older(store: Store) -> None:
    now = utcnow()
    await store.settle_events([], agent=Agent(id="old", updated_at=now - timedelta(minutes=5)))
    await store.settle_events([], agent=Agent(id="busy", state="busy", updated_at=now))
    changed = await store.agents_changed_since(now - timedelta(seconds=1))
    assert [(a.id, a.state) for a in changed] == [("busy", "busy")]
    assert [a.id for a in await store.agents_changed_since(now - timedelta(days=1))] == [
        "busy",
        "old",
    ]


async def test_events_after_a_place_and_each_agents_newest(store: Store) -> None:
    assert await store.last_seq() == 0
    first = message("backend", text="one")
    await store.record_event(first)
    seq = await store.last_seq()
    later = [message("backend", text="two"), message("frontend", text="three")]
    for event in later:
        await store.record_event(event)
    after = await store.events_after_seq(seq, 10)
    assert [e.id for _, e in after] == [e.id for e in later]
    assert [s for s, _ in after] == sorted(s for s, _ in after) and after[0][0] > seq
    assert await store.events_after_seq(seq, 1) == after[:1]
    assert sorted(await store.statuses_after_seq(seq)) == sorted(
        (e.id, e.agent_id, "new") for e in later
    )
    newest = await store.last_event_times()
    assert newest == {"backend": later[0].created_at, "frontend": later[1].created_at}


async def test_each_agents_newest_message_out(store: Store) -> None:
    said = [
        message("backend", "cli:local", "first", direction="out", type="agent_message"),
        message("backend", "cli:local", "second", direction="out", type="agent_message"),
        message("backend", "cli:local", "a human's", direction="in"),
    ]
    for event in said:
        await store.record_event(event)
    replies = await store.last_replies()
    assert {a: e.payload["text"] for a, e in replies.items()} == {"backend": "second"}


async def test_messages_waiting_counted_for_many_agents_at_once(store: Store) -> None:
    """As the agents page asks it, for every agent in one read (on PostgreSQL one array, not a
    thousand parameters)."""
    for agent_id, waiting in (("one", 2), ("two", 1)):
        for n in range(waiting):
            await store.record_event(message(agent_id, text=f"waits {n}"))
    await store.record_event(message("two", text="typed", status="delivered"))
    asked = ["one", "two", *(f"idle-{n}" for n in range(1500))]
    assert await store.waiting_counts(asked) == {"one": 2, "two": 1}
