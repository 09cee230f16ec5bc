"""The projection's one API: :class:`Store`.

Every write is idempotent, because the writers are Temporal activities and an activity may run
again after it already succeeded. All ordering uses ``events.seq``, never ids or timestamps.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypeVar, get_args

from sqlalchemy import (
    ColumnElement,
    LargeBinary,
    case,
    cast,
    delete,
    func,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentcomms.errors import EventNotFound
from agentcomms.models import (
    ACTIVE_STATUSES,
    Agent,
    CallRecord,
    Channel,
    Event,
    EventStatus,
    Try,
    utcnow,
)
from agentcomms.store.engine import (
    PG_LOCK_AGENT_EVENTS,
    PG_LOCK_CHANNEL_EVENTS,
    create_engine,
    create_sqlite_writer,
    write_transaction,
)
from agentcomms.store.migrate import database_errors, ensure_schema_current, upgrade_engine
from agentcomms.store.records import ChatSender, from_row, row_values
from agentcomms.store.schema import (
    AgentRow,
    Base,
    CallRow,
    ChannelRow,
    ChatSenderRow,
    EventBeforeSigningRow,
    EventRow,
    PairingCodeRow,
)

# What check_messages and chat history show an agent; interrupts and system events are not messages.
MESSAGE_TYPES = ("human_message", "agent_message")
_STATUSES = frozenset(get_args(EventStatus))
T = TypeVar("T")


def _check_limit(limit: int) -> None:
    if limit < 0:
        raise ValueError(f"limit must be 0 or more, not {limit}")


def _shown_to_agent() -> ColumnElement[bool]:
    # Rejected: never typed, and not for the agent's eyes either. The allowlist refused its
    # sender, or the deployment did not sign it (a forgery: showing its text would do what
    # typing it would), or it was a voice note nobody could transcribe, or it came past the
    # mailbox's hard cap. Kept for the operator (`events`, `trace`, with the reason in error).
    return EventRow.status != "rejected"


class Store:
    """Events, agents, channels and calls in a SQL database (SQLite file or PostgreSQL).

    ``store = await Store.open(url)`` (or ``async with await Store.open(url) as store``).
    """

    def __init__(self, engine: AsyncEngine, writer: Engine | None = None) -> None:
        self._engine = engine
        self._dialect = engine.dialect.name
        # SQLite has one writer at a time. Writers of this process queue for one thread (or,
        # without it, one lock), in order, rather than in SQLite's busy-wait, which under 20
        # concurrent writers halved throughput and let single writes wait 0.75 s
        # (bench/bench_mailbox.py); other processes still use the busy timeout.
        self._writer = writer  # see create_sqlite_writer
        self._writer_thread = (
            ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer") if writer else None
        )
        self._sqlite_writes = (
            asyncio.Lock() if self._dialect == "sqlite" and writer is None else None
        )
        # Events the gateway records, waiting for the next group commit (see record_event).
        self._queued_inserts: list[tuple[Event, asyncio.Future[bool]]] = []
        self._inserter: asyncio.Task[None] | None = None

    async def _transact(self, body: Callable[[Connection], T]) -> T:
        """Run ``body`` in one write transaction: on a SQLite file whole in the writer thread,
        otherwise on the async engine's connection."""
        if self._writer is not None:
            assert self._writer_thread is not None
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._writer_thread, self._run_in_writer, body)
        async with self._sqlite_writes or contextlib.nullcontext():
            async with write_transaction(self._engine) as conn:
                return await conn.run_sync(body)

    def _run_in_writer(self, body: Callable[[Connection], T]) -> T:
        assert self._writer is not None
        with self._writer.begin() as conn:
            return body(conn)

    @classmethod
    async def open(cls, url: str, *, migrate: bool = True) -> Store:
        """Connect to ``url``; bring its tables up to date, or with ``migrate=False`` only check them.

        Raises ``DatabaseUnavailable`` when the database cannot be reached and ``SchemaOutdated``
        when ``migrate=False`` finds tables of another revision.
        """
        engine = create_engine(url)
        try:
            async with database_errors(url):
                if migrate:
                    await upgrade_engine(engine)
                else:
                    await ensure_schema_current(engine)
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine, create_sqlite_writer(url))

    async def close(self) -> None:
        if self._inserter is not None:
            await asyncio.gather(self._inserter, return_exceptions=True)
        if self._writer is not None and self._writer_thread is not None:
            # Its connection closes in the thread that opened it.
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._writer_thread, self._writer.dispose)
            self._writer_thread.shutdown()
        await self._engine.dispose()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    # -- events --------------------------------------------------------------------------------

    async def record_event(self, event: Event) -> bool:
        """Insert ``event`` unless an event with its id exists; True when it was inserted.

        A retried or re-sent write changes nothing, not even the status of the stored event.
        Concurrent calls share one transaction: while one commit runs, the events that arrive
        queue up and go in the next (a group commit: one fsync for many sends).
        """
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._queued_inserts.append((event, done))
        if self._inserter is None or self._inserter.done():
            # A task of its own: a caller that gives up must not take the others' write with it.
            self._inserter = asyncio.create_task(self._insert_queued())
        return await done

    async def _insert_queued(self) -> None:
        while self._queued_inserts:
            batch, self._queued_inserts = self._queued_inserts, []
            try:
                inserted = await self.record_events([event for event, _ in batch])
            except Exception as exc:
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
            else:
                for event, done in batch:
                    # The same event twice in one batch: the first one inserted it.
                    fresh = event.id in inserted
                    inserted.discard(event.id)
                    if not done.done():
                        done.set_result(fresh)

    async def record_events(self, events: list[Event]) -> set[str]:
        """Insert the events whose ids are not stored yet, in one transaction; the ids inserted."""
        if not events:
            return set()
        rows = [row_values(e) for e in events]

        def insert(conn: Connection) -> set[str]:
            self._serialize_inserts(conn, events)
            return {row.id for row in conn.execute(self._insert_new_stmt, rows)}

        return await self._transact(insert)

    def _serialize_inserts(self, conn: Connection, events: list[Event]) -> None:
        if self._dialect != "postgresql":
            return  # SQLite has one writer at a time: seq order is commit order already
        # Without this, seq 11 could commit before seq 10, and a reader paging "after 11" would
        # never see 10. Serialising the inserts of one agent, and of one channel (two agents
        # answering in the local inbox at once), makes seq order commit order for both readers.
        # Always agents first, then channels, each sorted: no two writers can deadlock.
        lock = text("SELECT pg_advisory_xact_lock(:cls, hashtext(:key))")
        for agent_id in sorted({e.agent_id for e in events}):
            conn.execute(lock, {"cls": PG_LOCK_AGENT_EVENTS, "key": agent_id})
        for channel_id in sorted({e.channel_id for e in events}):
            conn.execute(lock, {"cls": PG_LOCK_CHANNEL_EVENTS, "key": channel_id})

    async def settle_events(self, events: list[Event], *, agent: Agent | None = None) -> None:
        """Write events as their mailbox settled them, and its agent row, in one transaction:
        each event inserted when absent (the gateway's early write may have been lost),
        otherwise its status, attempts, delivery time, error and note updated. A delivered
        event stays delivered. The agent row keeps its read cursor and registration time.
        An event that carries no tries keeps those stored (:meth:`append_try` wrote them).
        """
        for event in events:
            if event.status not in _STATUSES:
                raise ValueError(f"status must be one of {sorted(_STATUSES)}, not {event.status!r}")
        if not events and agent is None:
            return
        # In runs, so that events inserted here still take their seqs in list order.
        runs = [
            (self._settle_keeping_tries_stmt if keep else self._settle_stmt, list(run))
            for keep, run in itertools.groupby(events, key=lambda e: not e.tries)
        ]
        row = None
        if agent is not None:
            row = self._upsert_stmt(
                AgentRow, row_values(agent), key="id", on_insert={"registered_at": utcnow()}
            )

        def settle(conn: Connection) -> None:
            if events:
                self._serialize_inserts(conn, events)
            for stmt, run in runs:
                conn.execute(stmt, [row_values(e) for e in run])
            if row is not None:
                conn.execute(row)

        await self._transact(settle)

    async def append_try(self, event_id: str, failed: Try, *, attempt: int, keep: int) -> bool:
        """Add a failed attempt to a stored event's tries, keeping the latest ``keep``, and count
        it: ``attempts`` becomes at least ``attempt``. False when no event has that id.

        For a chat send, whose retries happen in Temporal where its workflow never sees them:
        the sending activity records each failure itself.
        """
        mine = EventRow.id == event_id

        def append(conn: Connection) -> bool:
            # FOR UPDATE (PostgreSQL; SQLite has one writer anyway): two appends must not both
            # read the same list and each write back only their own try.
            stmt = select(EventRow.tries, EventRow.attempts).where(mine).with_for_update()
            row = conn.execute(stmt).first()
            if row is None:
                return False
            tries = [*(row.tries or []), failed.model_dump(mode="json")][-keep:]
            conn.execute(
                update(EventRow)
                .where(mine)
                .values(tries=tries, attempts=max(row.attempts, attempt))
            )
            return True

        return await self._transact(append)

    async def waiting_for(self, agent_id: str) -> tuple[int, int]:
        """How many messages to the agent wait to be typed, and the UTF-8 bytes of their text."""
        text_of = EventRow.payload["text"].as_string()
        size = (
            func.octet_length(text_of)
            if self._dialect == "postgresql"
            else func.length(cast(text_of, LargeBinary))
        )
        stmt = select(func.count(), func.coalesce(func.sum(size), 0)).where(
            EventRow.agent_id == agent_id,
            EventRow.status == "new",
            EventRow.direction == "in",
            EventRow.type.in_(MESSAGE_TYPES),
        )
        async with self._engine.connect() as conn:
            count, size_total = (await conn.execute(stmt)).one()
        return int(count), int(size_total)

    async def waiting_counts(self, agent_ids: list[str]) -> dict[str, int]:
        """How many messages wait to be typed, per agent (those with none are left out).

        Counted from the events the gateway recorded, so it holds while an agent's mailbox
        cannot run (its host's worker is down) and the agent's own row is not updated."""
        counts: dict[str, int] = {}
        async with self._engine.connect() as conn:
            # In chunks: a statement takes at most 32,767 parameters on PostgreSQL.
            for start in range(0, len(agent_ids), 1000):
                stmt = (
                    select(EventRow.agent_id, func.count())
                    .where(
                        EventRow.agent_id.in_(agent_ids[start : start + 1000]),
                        EventRow.status == "new",
                        EventRow.direction == "in",
                        EventRow.type.in_(MESSAGE_TYPES),
                    )
                    .group_by(EventRow.agent_id)
                )
                counts.update({a: int(n) for a, n in await conn.execute(stmt)})
        return counts

    async def events_by_id(self, agent_id: str, event_ids: list[str]) -> dict[str, Event]:
        """The agent's events with these ids (those that exist), by id."""
        if not event_ids:
            return {}
        stmt = select(EventRow).where(EventRow.agent_id == agent_id, EventRow.id.in_(event_ids))
        async with self._engine.connect() as conn:
            return {row.id: from_row(Event, row) for row in await conn.execute(stmt)}

    async def waiting_since_before_signing(self, agent_id: str, event_id: str) -> Event | None:
        """The agent's event with this id as recorded, if it was waiting untagged when the
        deployment began to sign (listed by the upgrade) and waits still; else None."""
        stmt = (
            select(EventRow)
            .join(EventBeforeSigningRow, EventBeforeSigningRow.id == EventRow.id)
            .where(
                EventRow.id == event_id,
                EventRow.agent_id == agent_id,
                EventRow.status == "new",
                EventRow.signature.is_(None),
            )
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(stmt)).first()
        return from_row(Event, row) if row else None

    async def get_event(self, event_id: str) -> Event | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(EventRow).where(EventRow.id == event_id))).first()
        return from_row(Event, row) if row else None

    async def events_after(
        self, agent_id: str, since_id: str | None, limit: int, *, rejected: bool = True
    ) -> list[Event]:
        """Up to ``limit`` of the agent's events that came strictly after ``since_id``, oldest first.

        ``since_id=None`` starts at the agent's first event. An id that is not one of this agent's
        events raises ``EventNotFound`` (rather than silently starting over). ``rejected=False``
        leaves out rejected events, whatever refused them (what the agent itself may see).
        """
        _check_limit(limit)
        async with self._engine.connect() as conn:
            after = 0 if since_id is None else await self._seq_of(conn, since_id, agent_id)
            stmt = (
                select(EventRow)
                .where(
                    EventRow.agent_id == agent_id,
                    EventRow.seq > after,
                    *([] if rejected else [_shown_to_agent()]),
                )
                .order_by(EventRow.seq)
                .limit(limit)
            )
            return [from_row(Event, row) for row in await conn.execute(stmt)]

    async def latest_events(
        self, agent_id: str, limit: int, *, rejected: bool = True
    ) -> list[Event]:
        """The agent's ``limit`` most recent events, newest first (``rejected``: as above)."""
        _check_limit(limit)
        stmt = (
            select(EventRow)
            .where(EventRow.agent_id == agent_id, *([] if rejected else [_shown_to_agent()]))
            .order_by(EventRow.seq.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return [from_row(Event, row) for row in await conn.execute(stmt)]

    async def channel_history(
        self,
        channel_id: str,
        limit: int,
        agent_id: str | None = None,
        direction: Literal["in", "out"] | None = None,
        after_id: str | None = None,
    ) -> list[Event]:
        """The newest ``limit`` messages of a channel, both directions, returned oldest first.

        ``agent_id`` narrows it to one agent's side of the channel (its messages in and out);
        ``direction`` to messages towards agents ("in") or from them ("out"). With ``after_id``:
        the first ``limit`` messages after that event instead (to follow a channel cheaply).
        """
        _check_limit(limit)
        async with self._engine.connect() as conn:
            after = None if after_id is None else await self._seq_of(conn, after_id)
            stmt = select(EventRow).where(
                EventRow.channel_id == channel_id,
                EventRow.type.in_(MESSAGE_TYPES),
                _shown_to_agent(),
                *([EventRow.agent_id == agent_id] if agent_id is not None else []),
                *([EventRow.direction == direction] if direction is not None else []),
                *([EventRow.seq > after] if after is not None else []),
            )
            # Following: the first `limit` after it; otherwise the newest `limit`, read backwards.
            order = EventRow.seq if after is not None else EventRow.seq.desc()
            rows = await conn.execute(stmt.order_by(order).limit(limit))
            events = [from_row(Event, row) for row in rows]
        return events if after is not None else events[::-1]

    # -- the read cursor (check_messages) ------------------------------------------------------

    async def unread_messages(self, agent_id: str, limit: int) -> tuple[list[Event], bool]:
        """Messages to the agent after its read cursor, oldest first, and whether more wait.

        Reading does not move the cursor: :meth:`advance_read_cursor` does, once they were shown.
        """
        _check_limit(limit)
        cursor = select(AgentRow.read_cursor).where(AgentRow.id == agent_id).scalar_subquery()
        stmt = (
            select(EventRow)
            .where(
                EventRow.agent_id == agent_id,
                EventRow.direction == "in",
                EventRow.type.in_(MESSAGE_TYPES),
                _shown_to_agent(),
                EventRow.seq > func.coalesce(cursor, 0),
            )
            .order_by(EventRow.seq)
            .limit(limit + 1)  # one more than asked tells whether more wait
        )
        async with self._engine.connect() as conn:
            events = [from_row(Event, row) for row in await conn.execute(stmt)]
        return events[:limit], len(events) > limit

    async def advance_read_cursor(self, agent_id: str, event_id: str) -> bool:
        """Mark the agent's messages up to ``event_id`` as read; True if the cursor moved.

        The cursor only moves forward, so a stale acknowledgement is harmless. An agent without a
        row yet (messages may arrive before it registers) gets one, offline.
        """

        def advance(conn: Connection) -> bool:
            seq = conn.execute(_seq_stmt(event_id, agent_id)).scalar_one_or_none()
            if seq is None:
                raise EventNotFound(event_id, agent_id)
            now = utcnow()
            new_row = row_values(Agent(id=agent_id, updated_at=now))
            stmt = self._insert(AgentRow).values(
                {**new_row, "read_cursor": seq, "registered_at": now}
            )
            stmt = stmt.on_conflict_do_update(
                index_elements=[AgentRow.id],
                set_={"read_cursor": stmt.excluded.read_cursor},
                where=or_(AgentRow.read_cursor.is_(None), AgentRow.read_cursor < seq),
            )
            return conn.execute(stmt).rowcount > 0

        return await self._transact(advance)

    # -- agents --------------------------------------------------------------------------------

    async def get_agent(self, agent_id: str) -> Agent | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(AgentRow).where(AgentRow.id == agent_id))).first()
        return from_row(Agent, row) if row else None

    async def list_agents(self, *, include_offline: bool = False) -> list[Agent]:
        """Agents by id: online and unreachable ones, and offline ones too when asked."""
        stmt = select(AgentRow).order_by(AgentRow.id)
        if not include_offline:
            stmt = stmt.where(AgentRow.status != "offline")
        async with self._engine.connect() as conn:
            return [from_row(Agent, row) for row in await conn.execute(stmt)]

    # -- channels ------------------------------------------------------------------------------

    async def upsert_channel(self, channel: Channel) -> None:
        await self._upsert(
            ChannelRow, row_values(channel), key="channel_id", on_insert={"created_at": utcnow()}
        )

    async def list_channels(self) -> list[Channel]:
        async with self._engine.connect() as conn:
            rows = await conn.execute(select(ChannelRow).order_by(ChannelRow.channel_id))
            return [from_row(Channel, row) for row in rows]

    async def agent_for_channel(self, channel_id: str) -> str | None:
        """The agent a channel talks to; None for an unknown or unassigned channel."""
        stmt = select(ChannelRow.agent_id).where(ChannelRow.channel_id == channel_id)
        async with self._engine.connect() as conn:
            return (await conn.execute(stmt)).scalar_one_or_none()

    # -- chat senders and pairing ---------------------------------------------------------------

    async def sender_admitted(self, provider: str, sender_id: str) -> bool:
        """Whether the sender was admitted by pairing and not revoked since."""
        stmt = select(ChatSenderRow.sender_id).where(
            ChatSenderRow.provider == provider,
            ChatSenderRow.sender_id == sender_id,
            ChatSenderRow.revoked_at.is_(None),
        )
        async with self._engine.connect() as conn:
            return (await conn.execute(stmt)).first() is not None

    async def offer_pairing(self, sender: ChatSender, now: datetime) -> tuple[str, bool]:
        """The sender's pending pairing code, and whether it is new.

        An unexpired code is kept (so a stranger who writes ten times is answered once);
        otherwise ``sender.code`` is stored until ``sender.expires_at``.
        """
        assert sender.code is not None and sender.expires_at is not None
        mine = (PairingCodeRow.provider == sender.provider) & (
            PairingCodeRow.sender_id == sender.sender_id
        )
        code, expires_at = sender.code, sender.expires_at

        def offer(conn: Connection) -> tuple[str, bool]:
            row = conn.execute(select(PairingCodeRow).where(mine)).first()
            if row is not None and row.expires_at > now:
                return row.code, False
            conn.execute(delete(PairingCodeRow).where(mine))
            conn.execute(
                self._insert(PairingCodeRow).values(
                    code=code,
                    provider=sender.provider,
                    sender_id=sender.sender_id,
                    sender_name=sender.sender_name,
                    chat_id=sender.chat_id,
                    created_at=now,
                    expires_at=expires_at,
                )
            )
            return code, True

        return await self._transact(offer)

    async def admit_by_code(self, code: str, now: datetime) -> ChatSender | None:
        """Admit the sender a pairing code was given to; None for an unknown or expired code."""

        def admit(conn: Connection) -> ChatSender | None:
            row = conn.execute(select(PairingCodeRow).where(PairingCodeRow.code == code)).first()
            if row is None:
                return None
            conn.execute(delete(PairingCodeRow).where(PairingCodeRow.code == code))
            if row.expires_at <= now:
                return None
            values = {
                "provider": row.provider,
                "sender_id": row.sender_id,
                "sender_name": row.sender_name,
                "chat_id": row.chat_id,
                "admitted_at": now,
                "revoked_at": None,
            }
            stmt = self._insert(ChatSenderRow).values(values)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=[ChatSenderRow.provider, ChatSenderRow.sender_id],
                    set_={
                        k: stmt.excluded[k] for k in values if k not in ("provider", "sender_id")
                    },
                )
            )
            return ChatSender.model_validate(values)

        return await self._transact(admit)

    async def revoke_sender(self, provider: str, sender_id: str, now: datetime) -> bool:
        """Revoke an admitted sender (kept, for the record); True when one was admitted."""
        stmt = (
            update(ChatSenderRow)
            .where(
                ChatSenderRow.provider == provider,
                ChatSenderRow.sender_id == sender_id,
                ChatSenderRow.revoked_at.is_(None),
            )
            .values(revoked_at=now)
        )
        return await self._transact(lambda conn: conn.execute(stmt).rowcount > 0)

    async def list_senders(self) -> list[ChatSender]:
        """Admitted (and revoked) senders, then those holding a pairing code."""
        async with self._engine.connect() as conn:
            admitted = await conn.execute(
                select(ChatSenderRow).order_by(ChatSenderRow.provider, ChatSenderRow.sender_id)
            )
            senders = [from_row(ChatSender, row) for row in admitted]
            pending = await conn.execute(select(PairingCodeRow).order_by(PairingCodeRow.created_at))
            senders += [from_row(ChatSender, row) for row in pending]
        return senders

    # -- calls ---------------------------------------------------------------------------------

    async def upsert_call(self, call: CallRecord) -> None:
        """Write a call's row as its workflow sees it now (a retry writes the same again)."""
        await self._upsert(CallRow, call.model_dump(), key="id")

    async def get_call(self, call_id: str) -> CallRecord | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(CallRow).where(CallRow.id == call_id))).first()
        return from_row(CallRecord, row) if row else None

    async def list_calls(
        self,
        *,
        agent_id: str | None = None,
        active: bool = False,
        phone_number: str | None = None,
        limit: int = 50,
    ) -> list[CallRecord]:
        """The newest calls first: an agent's, those still up, those to one number."""
        _check_limit(limit)
        stmt = select(CallRow).order_by(CallRow.started_at.desc(), CallRow.id.desc()).limit(limit)
        if agent_id is not None:
            stmt = stmt.where(CallRow.agent_id == agent_id)
        if active:
            stmt = stmt.where(CallRow.status.in_(ACTIVE_STATUSES))
        if phone_number is not None:
            stmt = stmt.where(CallRow.phone_number == phone_number)
        async with self._engine.connect() as conn:
            return [from_row(CallRecord, row) for row in await conn.execute(stmt)]

    # -- helpers -------------------------------------------------------------------------------

    # The statements written on every message are built once: building one (its ON CONFLICT
    # clause, its cache key) cost about as much CPU as SQLite took to run it.

    @functools.cached_property
    def _insert_new_stmt(self) -> Any:
        """Insert events whose ids are not stored yet, returning the ids inserted."""
        return (
            self._insert(EventRow)
            .on_conflict_do_nothing(index_elements=[EventRow.id])
            .returning(EventRow.id)
        )

    @functools.cached_property
    def _settle_stmt(self) -> Any:
        """Insert a settled event, or update the stored one unless it was delivered already."""
        return self._settle_stmt_writing(tries=True)

    @functools.cached_property
    def _settle_keeping_tries_stmt(self) -> Any:
        """The same, for an event that carries no tries: the stored ones stay."""
        return self._settle_stmt_writing(tries=False)

    def _settle_stmt_writing(self, *, tries: bool) -> Any:
        insert = self._insert(EventRow)
        columns = {
            "status": insert.excluded.status,
            "attempts": case(
                (EventRow.attempts < insert.excluded.attempts, insert.excluded.attempts),
                else_=EventRow.attempts,
            ),
            "delivered_at": insert.excluded.delivered_at,
            "error": insert.excluded.error,
            "note": insert.excluded.note,
        }
        if tries:
            columns["tries"] = insert.excluded.tries
        return insert.on_conflict_do_update(
            index_elements=[EventRow.id], set_=columns, where=EventRow.status != "delivered"
        )

    def _insert(self, entity: type[Base]) -> Any:
        # ON CONFLICT is dialect-specific in SQLAlchemy; both dialects spell it the same way.
        dialect = postgresql if self._dialect == "postgresql" else sqlite
        return dialect.insert(entity)

    def _upsert_stmt(
        self,
        entity: type[Base],
        values: Mapping[str, Any],
        *,
        key: str,
        on_insert: Mapping[str, Any] | None = None,
    ) -> Any:
        """Insert ``values`` (plus ``on_insert``), or update the existing row with ``values``."""
        stmt = self._insert(entity).values({**values, **(on_insert or {})})
        return stmt.on_conflict_do_update(
            index_elements=[key],
            set_={name: stmt.excluded[name] for name in values if name != key},
        )

    async def _upsert(
        self,
        entity: type[Base],
        values: Mapping[str, Any],
        *,
        key: str,
        on_insert: Mapping[str, Any] | None = None,
    ) -> None:
        stmt = self._upsert_stmt(entity, values, key=key, on_insert=on_insert)
        await self._transact(lambda conn: conn.execute(stmt))

    @staticmethod
    async def _seq_of(conn: AsyncConnection, event_id: str, agent_id: str | None = None) -> int:
        seq: int | None = (await conn.execute(_seq_stmt(event_id, agent_id))).scalar_one_or_none()
        if seq is None:
            raise EventNotFound(event_id, agent_id)
        return seq


def _seq_stmt(event_id: str, agent_id: str | None) -> Any:
    """The seq of an event (of this agent's, when given), to page from it."""
    stmt = select(EventRow.seq).where(EventRow.id == event_id)
    if agent_id is not None:
        stmt = stmt.where(EventRow.agent_id == agent_id)
    return stmt
