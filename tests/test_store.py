"""The projection store against real databases: a SQLite file, and PostgreSQL when configured."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from agentcomms.ids import new_event_id, provider_event_id
from agentcomms.models import Agent, Channel, Event, Try
from agentcomms.store import (
    DatabaseUnavailable,
    EventNotFound,
    SchemaOutdated,
    Store,
    head_revision,
    schema_status,
    upgrade_database,
)
from agentcomms.store.engine import create_engine
from agentcomms.store.schema import metadata
from tests.support.events import message, record_all

TABLES = {"events", "agents", "channels", "calls"}


def ids(events: list[Event]) -> list[str]:
    return [event.id for event in events]


# -- migrations ------------------------------------------------------------------------------


async def test_upgrade_creates_tables_on_an_empty_database_and_is_a_no_op_again(
    database_url: str,
) -> None:
    before = await schema_status(database_url)
    assert before.current is None and not before.up_to_date

    await upgrade_database(database_url)
    async with await Store.open(database_url, migrate=False) as store:
        event = message()
        await store.record_event(event)

    await upgrade_database(database_url)  # again: nothing to do, nothing lost
    after = await schema_status(database_url)
    assert after.current == after.head == head_revision() and after.up_to_date
    async with await Store.open(database_url) as store:
        assert await store.get_event(event.id) == event
        async with store.engine.connect() as conn:
            tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    assert tables >= TABLES | {"alembic_version"}


async def test_migrations_match_schema(database_url: str) -> None:
    """The revisions in migrations/versions build exactly what store/schema.py declares."""
    await upgrade_database(database_url)
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:

            def diff(sync_conn: Connection) -> list[Any]:
                context = MigrationContext.configure(sync_conn, opts={"compare_type": True})
                return list(compare_metadata(context, metadata))

            assert await conn.run_sync(diff) == []
    finally:
        await engine.dispose()


async def test_concurrent_upgrades_do_not_collide(database_url: str) -> None:
    # Worker and gateway started together both upgrade an empty database.
    await asyncio.gather(*(upgrade_database(database_url) for _ in range(4)))
    assert (await schema_status(database_url)).up_to_date


async def test_upgrades_of_different_databases_in_one_process_do_not_mix(tmp_path: Path) -> None:
    # Alembic keeps the running migration in module globals; interleaved, two upgrades broke
    # each other (KeyError 'config', or one database's tables created twice).
    urls = [f"sqlite+aiosqlite:///{tmp_path / f'db{i}.db'}" for i in range(4)]
    await asyncio.gather(*(upgrade_database(url) for url in urls))
    for url in urls:
        assert (await schema_status(url)).up_to_date


async def test_many_connections_opening_a_new_sqlite_file_all_get_wal(tmp_path: Path) -> None:
    # The first switch to WAL needs an exclusive lock that SQLite may refuse at once, without
    # waiting for busy_timeout, when other connections open the new file at the same moment.
    for trial in range(10):
        engines = [
            create_engine(f"sqlite+aiosqlite:///{tmp_path / f'{trial}.db'}") for _ in range(6)
        ]
        try:

            async def journal_mode(engine: Any) -> str:
                async with engine.connect() as conn:
                    return str((await conn.execute(text("PRAGMA journal_mode"))).scalar())

            assert await asyncio.gather(*(journal_mode(e) for e in engines)) == ["wal"] * 6
        finally:
            for engine in engines:
                await engine.dispose()


async def test_open_without_migrate_refuses_an_outdated_database(database_url: str) -> None:
    with pytest.raises(SchemaOutdated, match="agentcomms db upgrade"):
        await Store.open(database_url, migrate=False)


async def test_unreachable_database_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(DatabaseUnavailable, match="Cannot create the SQLite database"):
        await Store.open(f"sqlite+aiosqlite:///{blocker}/sub/agentcomms.db")
    # A closed port: the password must not appear in the message.
    with pytest.raises(DatabaseUnavailable) as caught:
        await Store.open("postgresql+asyncpg://someone:s3cret@127.0.0.1:1/agentcomms")
    assert "s3cret" not in str(caught.value)
    assert "127.0.0.1:1" in str(caught.value)
    with pytest.raises(DatabaseUnavailable, match="not a SQLAlchemy URL"):
        await Store.open("not a url")


# -- SQLite file ------------------------------------------------------------------------------


async def test_a_read_held_when_the_store_closes_is_closed_with_it(tmp_path: Path) -> None:
    # A read a cancelled task still held when the gateway stopped: its connection is out of the
    # pool, so the pool's disposal alone would leave it to the collector, in some later code.
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'agentcomms.db'}")
    held = await store.engine.connect()
    await held.execute(text("SELECT 1"))
    driver = (await held.get_raw_connection()).driver_connection
    await store.close()
    # aiosqlite's own mark of a closed connection:
    assert driver is not None and driver._connection is None
    await held.invalidate()  # what the held read learns when it next runs: its connection is gone


async def test_sqlite_file_is_private_wal_with_foreign_keys(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "dir" / "agentcomms.db"
    async with await Store.open(f"sqlite+aiosqlite:///{path}") as store:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        await store.record_event(message())
        wal = path.with_name(path.name + "-wal")
        assert stat.S_IMODE(wal.stat().st_mode) == 0o600
        async with store.engine.connect() as conn:
            assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
            assert (await conn.execute(text("PRAGMA foreign_keys"))).scalar() == 1
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar_one() >= 1000


async def test_existing_sqlite_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "agentcomms.db"
    path.touch()
    os.chmod(path, 0o640)
    await upgrade_database(f"sqlite+aiosqlite:///{path}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


async def test_concurrent_sqlite_writers_wait_instead_of_failing(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'agentcomms.db'}"
    stores = [await Store.open(url) for _ in range(3)]
    try:
        first, *rest = [message(text=str(n)) for n in range(30)]
        await stores[0].record_event(first)
        # Cursor moves read before they write: the case a plain deferred BEGIN turns into
        # "database is locked" at once.
        results = await asyncio.gather(
            *(stores[n % 3].record_event(event) for n, event in enumerate(rest)),
            *(stores[n % 3].advance_read_cursor("backend", first.id) for n in range(6)),
        )
        assert results.count(True) == len(rest) + 1  # every insert, and one cursor move
        assert len(await stores[0].latest_events("backend", 100)) == 30
    finally:
        for store in stores:
            await store.close()


# -- events ----------------------------------------------------------------------------------


async def test_record_event_round_trips_every_field(store: Store) -> None:
    event = Event(
        id=provider_event_id("telegram", 42, 7),
        agent_id="backend",
        channel_id="telegram:42",
        type="human_message",
        role="human",
        direction="in",
        source_agent_id="frontend",
        payload={"text": "héllo ✓", "sender_id": 7, "reply_to": None, "nested": {"a": [1, 2]}},
        status="failed",
        attempts=3,
        created_at=datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        delivered_at=datetime(2025, 1, 2, 3, 4, 6, tzinfo=timezone(timedelta(hours=2))),
        error="pane gone",
    )
    assert await store.record_event(event)
    stored = await store.get_event(event.id)
    assert stored == event
    assert stored is not None and stored.delivered_at is not None
    assert stored.delivered_at.tzinfo == UTC  # read back in UTC, the same instant
    assert stored.delivered_at == datetime(2025, 1, 2, 1, 4, 6, tzinfo=UTC)


async def test_naive_datetimes_are_taken_as_utc(store: Store) -> None:
    event = message(created_at=datetime(2025, 5, 6, 7, 8, 9))
    await store.record_event(event)
    stored = await store.get_event(event.id)
    assert stored is not None
    assert stored.created_at == datetime(2025, 5, 6, 7, 8, 9, tzinfo=UTC)


async def test_get_event_unknown_is_none(store: Store) -> None:
    assert await store.get_event(new_event_id()) is None


async def test_an_event_queued_for_insertion_is_read_back_before_its_write_is_awaited(
    tmp_path: Path,
) -> None:
    """The gateway answers a send before its row is written: whoever it answered reads it,
    also while another process holds the write lock and the insert waits for it."""
    path = tmp_path / "agentcomms.db"
    async with await Store.open(f"sqlite+aiosqlite:///{path}") as store:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process's write, under way
        asyncio.get_running_loop().call_later(0.3, other.execute, "ROLLBACK")
        events = [message(text=f"queued {n}") for n in range(3)]
        written = [store.queue_event(event) for event in events]
        try:
            stored = await store.get_event(events[-1].id)
            latest = await store.latest_events("backend", 10)
        finally:
            await asyncio.wait(written)
            other.close()
    assert stored is not None and stored.text == "queued 2"
    assert [e.text for e in latest] == ["queued 2", "queued 1", "queued 0"]
    assert [w.result() for w in written] == [True, True, True]


async def test_retried_record_event_changes_nothing(store: Store) -> None:
    event = message(text="original")
    assert await store.record_event(event) is True
    await store.settle_events([event.model_copy(update={"status": "delivered", "attempts": 1})])
    retried = event.model_copy(update={"payload": {"text": "changed"}, "status": "new"})
    assert await store.record_event(retried) is False
    stored = await store.get_event(event.id)
    assert stored is not None
    assert (stored.text, stored.status, stored.attempts) == ("original", "delivered", 1)
    assert len(await store.latest_events("backend", 10)) == 1


async def test_concurrent_duplicate_records_insert_once(store: Store) -> None:
    event = message()
    results = await asyncio.gather(*(store.record_event(event) for _ in range(8)))
    assert sorted(results) == [False] * 7 + [True]


async def test_delivered_is_final(store: Store) -> None:
    event = message()
    await store.record_event(event)
    delivered_at = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    done = event.model_copy(
        update={"status": "delivered", "attempts": 2, "delivered_at": delivered_at}
    )
    await store.settle_events([done])
    # A late report from an earlier attempt, and a retried "delivered" with other values.
    await store.settle_events(
        [event.model_copy(update={"status": "failed", "attempts": 1, "error": "timeout"})]
    )
    await store.settle_events(
        [done.model_copy(update={"attempts": 1, "delivered_at": datetime.now(UTC)})]
    )
    stored = await store.get_event(event.id)
    assert stored is not None
    assert (stored.status, stored.attempts, stored.delivered_at, stored.error) == (
        "delivered",
        2,
        delivered_at,
        None,
    )


async def test_attempts_never_decrease(store: Store) -> None:
    event = message()
    await store.record_event(event)
    await store.settle_events([event.model_copy(update={"status": "failed", "attempts": 3})])
    await store.settle_events([event.model_copy(update={"status": "failed", "attempts": 2})])
    stored = await store.get_event(event.id)
    assert stored is not None and stored.attempts == 3


async def test_settle_refuses_an_unknown_status(store: Store) -> None:
    with pytest.raises(ValueError, match="status must be one of"):
        await store.settle_events([message().model_copy(update={"status": "gone"})])


async def test_events_after_means_strictly_after_in_seq_order(store: Store) -> None:
    # Provider-derived ids are not time-ordered: these sort backwards by id.
    first, second, third, fourth = await record_all(
        store,
        message(id="evt_7ZZZZZZZZZZZZZZZZZZZZZZZZZ"),
        message(id="evt_50000000000000000000000000"),
        message(agent_id="other"),
        message(id="evt_00000000000000000000000000"),
    )
    fifth = (await record_all(store, message()))[0]
    assert ids(await store.events_after("backend", None, 10)) == ids([first, second, fourth, fifth])
    assert ids(await store.events_after("backend", first.id, 10)) == ids([second, fourth, fifth])
    assert ids(await store.events_after("backend", second.id, 2)) == ids([fourth, fifth])
    assert await store.events_after("backend", fifth.id, 10) == []
    assert ids(await store.events_after("backend", None, 1)) == [first.id]
    assert ids(await store.events_after("other", None, 10)) == [third.id]
    assert await store.events_after("nobody", None, 10) == []
    assert await store.events_after("backend", None, 0) == []


async def test_events_after_unknown_since_id(store: Store) -> None:
    other = (await record_all(store, message(agent_id="other")))[0]
    with pytest.raises(EventNotFound, match="evt_01ARZ3NDEKTSV4RRFFQ69G5FAV"):
        await store.events_after("backend", "evt_01ARZ3NDEKTSV4RRFFQ69G5FAV", 10)
    with pytest.raises(EventNotFound, match="backend"):  # another agent's event is not a position
        await store.events_after("backend", other.id, 10)


async def test_latest_events_newest_first(store: Store) -> None:
    events = await record_all(store, *(message(text=str(n)) for n in range(5)))
    await record_all(store, message(agent_id="other"))
    assert ids(await store.latest_events("backend", 3)) == ids(events[::-1][:3])
    assert ids(await store.latest_events("backend", 50)) == ids(events[::-1])
    with pytest.raises(ValueError, match="limit"):
        await store.latest_events("backend", -1)


async def test_channel_history_both_directions_newest_oldest_first(store: Store) -> None:
    channel = "telegram:42"
    q1 = message(channel_id=channel, text="question 1")
    a1 = message(
        channel_id=channel, text="answer 1", type="agent_message", role="agent", direction="out"
    )
    noise = [
        message(channel_id="discord:9", text="elsewhere"),
        message(channel_id=channel, type="interrupt", role="human", text="stop"),
        message(channel_id=channel, status="rejected", text="from a stranger"),
    ]
    q2 = message(channel_id=channel, text="question 2")
    a2 = message(
        channel_id=channel, text="answer 2", type="agent_message", role="agent", direction="out"
    )
    await record_all(store, q1, a1, *noise, q2, a2)

    assert ids(await store.channel_history(channel, 10)) == ids([q1, a1, q2, a2])
    assert ids(await store.channel_history(channel, 3)) == ids([a1, q2, a2])
    assert await store.channel_history("whatsapp:0", 10) == []
    # One direction, and following: what came after a given message, oldest first.
    assert ids(await store.channel_history(channel, 10, direction="out")) == ids([a1, a2])
    assert ids(await store.channel_history(channel, 2, after_id=q1.id)) == ids([a1, q2])
    assert ids(await store.channel_history(channel, 10, direction="out", after_id=a1.id)) == ids(
        [a2]
    )
    assert await store.channel_history(channel, 10, after_id=a2.id) == []
    with pytest.raises(EventNotFound):
        await store.channel_history(channel, 10, after_id=new_event_id())


# -- read cursor -----------------------------------------------------------------------------


async def test_unread_messages_are_inbound_messages_after_the_cursor(store: Store) -> None:
    m1 = message(text="one")
    m2 = message(
        channel_id="agent:frontend",
        type="agent_message",
        role="agent",
        text="two",
        source_agent_id="frontend",
        delivered_at=datetime.now(UTC),
        attempts=2,
    )
    skipped = [
        message(type="agent_message", role="agent", direction="out", text="my own reply"),
        message(type="interrupt", text="interrupt"),
        message(type="system", role="system", text="system"),
        message(status="rejected", text="stranger"),
        message(agent_id="other", text="not mine"),
    ]
    m3 = message(text="three")
    await record_all(store, m1, *skipped, m2, m3)

    unread, more = await store.unread_messages("backend", 2)
    assert (ids(unread), more) == (ids([m1, m2]), True)
    unread, more = await store.unread_messages("backend", 3)  # reading does not move the cursor
    assert (ids(unread), more) == (ids([m1, m2, m3]), False)
    # Read back whole, as recorded: the payload's JSON, the timestamps, every field.
    assert unread == [m1, m2, m3]

    assert await store.advance_read_cursor("backend", m2.id) is True
    unread, more = await store.unread_messages("backend", 10)
    assert (ids(unread), more) == ([m3.id], False)


async def test_read_cursor_only_moves_forward(store: Store) -> None:
    m1, m2, m3 = await record_all(store, message(), message(), message())
    assert await store.advance_read_cursor("backend", m2.id) is True
    assert await store.advance_read_cursor("backend", m1.id) is False  # a stale ack
    assert await store.advance_read_cursor("backend", m2.id) is False  # a retried ack
    assert ids((await store.unread_messages("backend", 10))[0]) == [m3.id]


async def test_read_cursor_rejects_unknown_and_foreign_events(store: Store) -> None:
    other = (await record_all(store, message(agent_id="other")))[0]
    with pytest.raises(EventNotFound):
        await store.advance_read_cursor("backend", new_event_id())
    with pytest.raises(EventNotFound):
        await store.advance_read_cursor("backend", other.id)


async def test_read_cursor_of_an_unregistered_agent_survives_registration(store: Store) -> None:
    m1, m2 = await record_all(store, message(), message())
    await store.advance_read_cursor("backend", m1.id)
    created = await store.get_agent("backend")
    assert created is not None and created.status == "offline"

    await store.settle_events([], agent=Agent(id="backend", target="work:0.0", status="online"))
    assert ids((await store.unread_messages("backend", 10))[0]) == [m2.id]


async def test_read_cursor_survives_reopening_the_store(database_url: str) -> None:
    async with await Store.open(database_url) as store:
        m1, m2 = await record_all(store, message(), message())
        await store.advance_read_cursor("backend", m1.id)
    async with await Store.open(database_url) as store:
        unread, more = await store.unread_messages("backend", 10)
    assert (ids(unread), more) == ([m2.id], False)


# -- agents, channels, calls -----------------------------------------------------------------


async def test_upsert_and_list_agents(store: Store) -> None:
    backend = Agent(
        id="backend",
        target="work:0.0",
        host="box",
        status="online",
        interrupt_key="Escape",
        pending=2,
    )
    await store.settle_events([], agent=backend)
    await store.settle_events([], agent=Agent(id="away", status="offline"))
    await store.settle_events(
        [], agent=Agent(id="lost", status="unreachable", last_error="pane gone")
    )

    assert await store.get_agent("backend") == backend
    assert await store.get_agent("nobody") is None
    assert [a.id for a in await store.list_agents()] == ["backend", "lost"]
    assert [a.id for a in await store.list_agents(include_offline=True)] == [
        "away",
        "backend",
        "lost",
    ]

    moved = backend.model_copy(update={"target": "work:1.0", "status": "offline", "pending": 0})
    await store.settle_events([], agent=moved)
    assert await store.get_agent("backend") == moved
    assert [a.id for a in await store.list_agents()] == ["lost"]


async def test_upsert_agent_keeps_registration_time(store: Store) -> None:
    await store.settle_events([], agent=Agent(id="backend"))
    query = text("SELECT registered_at FROM agents WHERE id = 'backend'")
    async with store.engine.connect() as conn:
        first = (await conn.execute(query)).scalar()
    await asyncio.sleep(0.01)
    await store.settle_events([], agent=Agent(id="backend", status="online"))
    async with store.engine.connect() as conn:
        assert (await conn.execute(query)).scalar() == first


async def test_channels(store: Store) -> None:
    await store.upsert_channel(
        Channel(channel_id="telegram:42", agent_id="backend", provider="telegram")
    )
    await store.upsert_channel(Channel(channel_id="discord:7", agent_id=None, provider="discord"))
    await store.upsert_channel(
        Channel(channel_id="telegram:42", agent_id="frontend", provider="telegram")
    )

    assert await store.list_channels() == [
        Channel(channel_id="discord:7", agent_id=None, provider="discord"),
        Channel(channel_id="telegram:42", agent_id="frontend", provider="telegram"),
    ]
    assert await store.agent_for_channel("telegram:42") == "frontend"
    assert await store.agent_for_channel("discord:7") is None
    assert await store.agent_for_channel("sms:+15550100") is None


async def test_settle_events_inserts_a_missing_row_and_updates_an_existing_one(
    store: Store,
) -> None:
    now = datetime.now(UTC)
    lost = message(status="delivered", attempts=1, delivered_at=now)
    await store.settle_events([lost])  # the gateway's early write never happened
    got = await store.get_event(lost.id)
    assert got is not None and got.status == "delivered" and got.delivered_at == now

    queued = message()
    assert await store.record_event(queued)
    await store.settle_events(
        [queued.model_copy(update={"status": "delivered", "attempts": 3, "delivered_at": now})]
    )
    got = await store.get_event(queued.id)
    assert got is not None and (got.status, got.attempts, got.delivered_at) == ("delivered", 3, now)
    assert [e.id for e in await store.events_after("backend", None, 10)] == [lost.id, queued.id]


async def test_settle_events_never_undoes_a_delivery(store: Store) -> None:
    event = message(status="delivered", attempts=2, delivered_at=datetime.now(UTC))
    await store.settle_events([event])
    await store.settle_events(
        [event.model_copy(update={"status": "failed", "attempts": 1, "error": "late"})]
    )
    got = await store.get_event(event.id)
    assert got is not None and got.status == "delivered" and got.attempts == 2 and got.error is None


async def test_appended_tries_survive_the_settle_and_keep_the_latest(store: Store) -> None:
    # A chat send: its activity records each failed attempt; the outbox settles it knowing none.
    sent = reply("backend", 1)
    await store.record_event(sent)
    at = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    for n in range(1, 13):
        failed = Try(at=at + timedelta(seconds=n), error=f"Telegram did not answer ({n})")
        assert await store.append_try(sent.id, failed, attempt=n, keep=10)
    waiting = await store.get_event(sent.id)
    assert waiting is not None and waiting.status == "new" and waiting.attempts == 12
    assert [t.error for t in waiting.tries] == [
        f"Telegram did not answer ({n})" for n in range(3, 13)
    ]
    await store.settle_events(
        [sent.model_copy(update={"status": "delivered", "attempts": 13, "delivered_at": at})]
    )
    settled = await store.get_event(sent.id)
    assert settled is not None and settled.status == "delivered" and settled.attempts == 13
    assert settled.tries == waiting.tries
    assert settled.tries[0].at == at + timedelta(seconds=3)

    # A settle that carries tries (a mailbox's) still writes them.
    typed = message()
    await store.record_event(typed)
    assert await store.append_try(typed.id, Try(at=at, error="stale"), attempt=1, keep=10)
    mine = [Try(at=at, error="can't find pane: dev:0.0")]
    await store.settle_events(
        [typed.model_copy(update={"status": "delivered", "attempts": 2, "tries": mine})]
    )
    got = await store.get_event(typed.id)
    assert got is not None and got.tries == mine


async def test_append_try_to_an_unknown_event_writes_nothing(store: Store) -> None:
    missing = new_event_id()
    failed = Try(at=datetime.now(UTC), error="Telegram did not answer")
    assert not await store.append_try(missing, failed, attempt=1, keep=10)
    assert await store.get_event(missing) is None


async def test_concurrent_writers_of_one_process_all_land(store: Store) -> None:
    events = [message(agent_id=f"a{i % 20}") for i in range(200)]
    await asyncio.gather(*(store.record_event(e) for e in events))
    await asyncio.gather(
        *(
            store.settle_events([e.model_copy(update={"status": "delivered", "attempts": 1})])
            for e in events
        )
    )
    for agent in {e.agent_id for e in events}:
        stored = await store.events_after(agent, None, 100)
        assert len(stored) == 10 and all(e.status == "delivered" for e in stored)


async def test_settle_events_writes_a_batch_in_order(store: Store) -> None:
    batch = [message(text=f"b{i}") for i in range(5)]
    await record_all(store, *batch[:2])  # the gateway wrote two; the others' writes were lost
    now = datetime.now(UTC)
    await store.settle_events(
        [
            e.model_copy(update={"status": "delivered", "attempts": 1, "delivered_at": now})
            for e in batch
        ]
    )
    stored = await store.events_after("backend", None, 10)
    assert [e.text for e in stored] == ["b0", "b1", "b2", "b3", "b4"]
    assert {e.status for e in stored} == {"delivered"}


# -- following a channel while several writers add to it ---------------------------------------


def reply(agent_id: str, n: int) -> Event:
    return message(
        agent_id=agent_id,
        channel_id="cli:local",
        text=f"{agent_id} {n}",
        type="agent_message",
        role="agent",
        direction="out",
    )


async def test_following_a_channel_misses_no_reply_from_concurrent_writers(
    database_url: str,
) -> None:
    """Agents answering in the local inbox at once, through two processes' stores (a gateway and
    a worker, say): a reader paging the channel by `after_id` sees every reply."""
    writers = [await Store.open(database_url) for _ in range(2)]
    reader = await Store.open(database_url)
    try:
        agents = [f"agent{i}" for i in range(8)]
        writing = asyncio.gather(
            *(
                writers[i % 2].record_event(reply(agent, n))
                for n in range(25)
                for i, agent in enumerate(agents)
            )
        )
        seen: list[Event] = []
        while True:
            finished = writing.done()  # before reading: a read after the last commit ends it
            after = seen[-1].id if seen else None
            if after is None:
                page = await reader.channel_history("cli:local", 1000, direction="out")
            else:
                page = await reader.channel_history(
                    "cli:local", 1000, direction="out", after_id=after
                )
            seen.extend(page)
            if finished and not page:
                break
            await asyncio.sleep(0)
        await writing
        assert len(seen) == len({e.id for e in seen}) == 200
    finally:
        for store in (*writers, reader):
            await store.close()


async def test_a_channel_insert_waits_for_an_earlier_uncommitted_one(database_url: str) -> None:
    """On PostgreSQL a later seq could commit first; every insert takes its channel's lock, so
    one that started later cannot overtake an open one and be read past it."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer at a time")
    from agentcomms.store.engine import PG_LOCK_CHANNEL_EVENTS

    async with await Store.open(database_url) as first, await Store.open(database_url) as second:
        async with first.engine.connect() as conn:
            # Another process's insert, open: it holds the channel as ours do.
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(:cls, hashtext('cli:local'))"),
                {"cls": PG_LOCK_CHANNEL_EVENTS},
            )
            later = asyncio.create_task(second.record_event(reply("other", 1)))
            done, _ = await asyncio.wait([later], timeout=0.5)
            assert not done  # waiting behind the open insert, not committed ahead of it
            await conn.commit()
        assert await later
