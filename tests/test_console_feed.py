"""What an open console page hears, against a real database: an event, its status moving on and
an agent's new state (SQLite, read a few times a second; PostgreSQL, announced as it commits), and
on PostgreSQL an event that commits after one with a higher seq, which reading "after the last
seq seen" would miss."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import insert, text

from agentcomms.models import Agent, Event, utcnow
from agentcomms.store import Store
from agentcomms.store.records import row_values
from agentcomms.store.schema import EventRow
from gateway.console.feed import WATCHED_STATUSES, Change, Feed
from tests.support.events import message

HEARD_S = 20


async def _heard(page: asyncio.Queue[Change | None], wanted: Callable[[Change], bool]) -> Change:
    """The first change the page is told that is `wanted` (others are skipped)."""
    async with asyncio.timeout(HEARD_S):
        while True:
            change = await page.get()
            assert change is not None, "the page was told to start over"
            if wanted(change):
                return change


def _event(event_id: str) -> Callable[[Change], bool]:
    return lambda c: c.kind == "event" and c.event is not None and c.event.id == event_id


async def _listening(
    writer: Store, page: asyncio.Queue[Change | None], agent_id: str, channel_id: str
) -> None:
    """Once the page hears an event written now, the watcher listens: what is written from
    here on is heard (before, only a page's own first read would tell it)."""
    while True:
        probe = message(agent_id, channel_id, text="listening?")
        await writer.record_event(probe)
        try:
            await asyncio.wait_for(_heard(page, _event(probe.id)), 1)
            return
        except TimeoutError:
            continue


async def test_an_event_its_status_and_an_agents_state_reach_an_open_page(
    database_url: str,
) -> None:
    async with await Store.open(database_url) as writer, await Store.open(database_url) as reader:
        feed = Feed(reader, tick_s=0.05)
        try:
            async with feed.listen() as page:
                await _listening(writer, page, "feed-a", "cli:a")
                typed = message("feed-a", text="typed")
                await writer.record_event(typed)
                await _heard(page, _event(typed.id))
                done = typed.model_copy(update={"status": "delivered", "delivered_at": utcnow()})
                busy = Agent(id="feed-a", state="busy", updated_at=utcnow())
                await writer.settle_events([done], agent=busy)
                told = [await _heard(page, lambda c: c.kind in ("status", "agent")) for _ in "ab"]
                moved = next(c for c in told if c.kind == "status")
                assert (moved.event_id, moved.status) == (typed.id, "delivered")
                state = next(c for c in told if c.kind == "agent")
                assert state.agent is not None and state.agent.state == "busy"
        finally:
            await feed.close()


async def test_an_event_typed_between_its_read_and_the_statuses_read_is_told_moving_on(
    database_url: str,
) -> None:
    """SQLite's reads: the new events, then the recent statuses. A message typed between the
    two is told as new and then as delivered, not left new on the page."""
    if database_url.startswith("postgresql"):
        pytest.skip("PostgreSQL announces each status as it commits")
    async with await Store.open(database_url) as writer, await Store.open(database_url) as reader:
        typed = message("feed-t", text="typed at once")
        done = typed.model_copy(update={"status": "delivered", "delivered_at": utcnow()})
        read_events = reader.events_after_seq

        async def typed_once_read(seq: int, limit: int) -> list[tuple[int, Event]]:
            read = await read_events(seq, limit)
            if any(e.id == typed.id for _, e in read):
                await writer.settle_events([done])  # lands before the statuses are read
            return read

        feed = Feed(reader, tick_s=0.05)
        try:
            async with feed.listen() as page:
                await _listening(writer, page, "feed-t", "cli:t")
                reader.events_after_seq = typed_once_read  # type: ignore[method-assign]
                await writer.record_event(typed)
                shown = await _heard(page, _event(typed.id))
                assert shown.event is not None and shown.event.status == "new"
                moved = await _heard(page, lambda c: c.kind == "status")
                assert (moved.event_id, moved.status) == (typed.id, "delivered")
        finally:
            await feed.close()


async def test_an_event_committed_after_a_higher_seq_still_reaches_an_open_page(
    database_url: str,
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite commits one write at a time, in seq order")
    async with (
        await Store.open(database_url) as writer,
        await Store.open(database_url) as other,
        await Store.open(database_url) as reader,
    ):
        feed = Feed(reader)
        try:
            async with feed.listen() as page:
                await _listening(writer, page, "feed-slow", "cli:slow")
                slow = message("feed-slow", "cli:slow", text="took its seq first")
                quick = message("feed-quick", "cli:quick", text="committed first")
                async with writer.engine.connect() as conn:
                    # A writer that took its seq, then is slow to commit (another process).
                    await conn.execute(insert(EventRow).values(row_values(slow)))
                    await other.record_event(quick)
                    heard_quick = await _heard(page, _event(quick.id))
                    await conn.commit()
                heard_slow = await _heard(page, _event(slow.id))
                assert heard_slow.seq < heard_quick.seq  # it landed behind what was read already
        finally:
            await feed.close()


async def test_pages_start_over_when_the_notices_connection_is_lost(database_url: str) -> None:
    """What the tables announced while nobody listened is not known: once the database answers
    again, every open page is told to read itself again whole."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has no notices: its pages read the projection")
    async with await Store.open(database_url) as writer, await Store.open(database_url) as reader:
        feed = Feed(reader)
        try:
            async with feed.listen() as page:
                await _listening(writer, page, "feed-cut", "cli:cut")
                async with writer.engine.connect() as conn:
                    cut = await conn.execute(
                        text(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE query LIKE 'LISTEN%' AND datname = current_database() "
                            "AND pid <> pg_backend_pid()"
                        )
                    )
                    assert cut.scalars().all() == [True]  # the feed's one listening connection
                async with asyncio.timeout(HEARD_S):
                    while await page.get() is not None:
                        pass  # changes told before the cut
        finally:
            await feed.close()


async def test_a_burst_of_events_reaches_an_open_page_whole(database_url: str) -> None:
    async with await Store.open(database_url) as writer, await Store.open(database_url) as reader:
        feed = Feed(reader, tick_s=0.05)
        try:
            async with feed.listen() as page:
                await _listening(writer, page, "feed-burst", "cli:burst")
                burst = [message(f"feed-burst-{n % 7}", text=f"n{n}") for n in range(450)]
                await writer.record_events(burst)
                heard: set[str] = set()
                while len(heard) < len(burst):
                    change = await _heard(page, lambda c: c.kind == "event")
                    assert change.event is not None
                    heard.add(change.event.id)
                assert heard == {e.id for e in burst}
        finally:
            await feed.close()


async def test_an_agents_row_counts_down_while_its_backlog_is_typed(database_url: str) -> None:
    """The mailbox writes the agent's row as a backlog starts and again only once it drained:
    meanwhile a page hears the row with what still waits, as `agents` says it, not the count
    from the start."""
    async with await Store.open(database_url) as writer, await Store.open(database_url) as reader:
        backlog = [message("feed-drain", "cli:drain", text=f"m{n}") for n in range(3)]
        await writer.record_events(backlog)
        typing = Agent(
            id="feed-drain",
            status="online",
            host="h",
            target="s:0.0",
            pending=3,
            state="busy",
            updated_at=utcnow() - timedelta(minutes=1),  # long before another agent's row
        )
        await writer.settle_events([], agent=typing)
        await writer.settle_events([], agent=Agent(id="feed-other", updated_at=utcnow()))
        # Many events since, as a long backlog has: its first ones are no longer among the
        # recent events whose statuses a page follows.
        later = [message("feed-later", "cli:later", text=f"n{n}") for n in range(WATCHED_STATUSES)]
        await writer.record_events(later)
        feed = Feed(reader, tick_s=0.05)
        try:
            async with feed.listen() as page:
                await _listening(writer, page, "feed-probe", "cli:probe")
                for left, event in zip((2, 1), backlog, strict=False):
                    done = event.model_copy(
                        update={"status": "delivered", "delivered_at": utcnow()}
                    )
                    await writer.settle_events([done])  # the row is not written again
                    told = await _heard(
                        page, lambda c: c.kind == "agent" and c.agent_id == "feed-drain"
                    )
                    assert told.agent is not None and told.agent.pending == left
        finally:
            await feed.close()
