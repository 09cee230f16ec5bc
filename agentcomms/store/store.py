"""The projection's one API: :class:`Store`.

Every write is idempotent, because the writers are Temporal activities and an activity may run
again after it already succeeded. All ordering uses ``events.seq``, never ids or timestamps.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from typing import Any, Literal, get_args

from sqlalchemy import (
    LargeBinary,
    case,
    cast,
    func,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentcomms.errors import EventNotFound
from agentcomms.models import (
    Agent,
    Event,
    EventStatus,
    Try,
    utcnow,
)
from agentcomms.store.approval_posts import ApprovalPosts
from agentcomms.store.base import check_limit
from agentcomms.store.changes import Changes
from agentcomms.store.directory import Directory
from agentcomms.store.engine import (
    PG_LOCK_AGENT_EVENTS,
    PG_LOCK_CHANNEL_EVENTS,
)
from agentcomms.store.guards import Guards
from agentcomms.store.mail_cursors import ChatMemory
from agentcomms.store.phone_callers import PhoneCallers
from agentcomms.store.phone_recordings import PhoneRecordings
from agentcomms.store.read_cursors import MESSAGE_TYPES, ReadCursors, shown_to_agent
from agentcomms.store.records import AGENT_COLUMNS, from_row, row_values
from agentcomms.store.schema import (
    AgentRow,
    EventRow,
)

# What check_messages and chat history show an agent; interrupts and system events are not messages.
_STATUSES = frozenset(get_args(EventStatus))
# The columns an event and an agent row are written with: their fields (row_values), and when
# an agent row is inserted, the time it was registered.


class Store(
    ApprovalPosts,
    ChatMemory,
    Changes,
    Directory,
    Guards,
    PhoneCallers,
    PhoneRecordings,
    ReadCursors,
):
    """Events, agents, channels and calls in a SQL database (SQLite file or PostgreSQL).

    ``store = await Store.open(url)`` (or ``async with await Store.open(url) as store``). The
    events are here; agents, channels and calls are :class:`Directory`'s, the chat allowlist
    :class:`ChatSenders`', what changed for live views :class:`Changes`', which chat
    message shows which approval :class:`ApprovalPosts`', each agent's read cursor
    :class:`ReadCursors`', the connection
    :class:`StoreBase`'s.
    """

    def __init__(self, engine: AsyncEngine, writer: Engine | None = None) -> None:
        super().__init__(engine, writer)
        self._inserter: asyncio.Task[None] | None = None

    async def close(self) -> None:
        if self._inserter is not None:
            await asyncio.gather(self._inserter, return_exceptions=True)
        await super().close()

    # -- events --------------------------------------------------------------------------------

    async def record_event(self, event: Event) -> bool:
        """Insert ``event`` unless an event with its id exists; True when it was inserted."""
        return await self.queue_event(event)

    def queue_event(self, event: Event) -> asyncio.Future[bool]:
        """Queue ``event`` for insertion unless an event with its id exists, and return at once:
        the future says whether it was inserted (or raises what the write met).

        A retried or re-sent write changes nothing, not even the status of the stored event.
        The events queued while one commit runs go in the next (a group commit: one fsync for
        many sends). Until an event is written, this store's reads of events wait for it: a
        caller answered before its row was written still reads its own event.
        """
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._queued_inserts.append((event, done))
        if self._inserter is None or self._inserter.done():
            # A task of its own: a caller that gives up must not take the others' write with it.
            self._inserter = asyncio.create_task(self._insert_queued())
        return done

    async def _insert_queued(self) -> None:
        while self._queued_inserts:
            batch = list(self._queued_inserts)  # left queued until written, for _reading
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
            del self._queued_inserts[: len(batch)]

    async def record_events(self, events: list[Event]) -> set[str]:
        """Insert the events whose ids are not stored yet, in one transaction; the ids inserted."""
        if not events:
            return set()
        rows = [row_values(e) for e in events]
        if self._driver is not None:
            insert_new = self._on_driver(self._insert_new_stmt)
            return await self._transact_on_driver(
                lambda cursor: {row[0] for row in insert_new.run(cursor, rows)}
            )

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
        agent_rows = [{**row_values(agent), "registered_at": utcnow()}] if agent else []
        if self._driver is not None:
            writes = [(self._on_driver(stmt), [row_values(e) for e in run]) for stmt, run in runs]
            if agent_rows:
                writes.append((self._on_driver(self._agent_row_stmt, AGENT_COLUMNS), agent_rows))
            await self._transact_on_driver(
                lambda cursor: [statement.run(cursor, rows) for statement, rows in writes]
            )
            return

        def settle(conn: Connection) -> None:
            if events:
                self._serialize_inserts(conn, events)
            for stmt, run in runs:
                conn.execute(stmt, [row_values(e) for e in run])
            if agent_rows:
                conn.execute(self._agent_row_stmt, agent_rows)

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
        async with self._reading() as conn:
            count, size_total = (await conn.execute(stmt)).one()
        return int(count), int(size_total)

    async def waiting_counts(self, agent_ids: list[str]) -> dict[str, int]:
        """How many messages wait to be typed, per agent (those with none are left out).

        Counted from the events the gateway recorded, so it holds while an agent's mailbox
        cannot run (its host's worker is down) and the agent's own row is not updated."""
        counts: dict[str, int] = {}
        async with self._reading() as conn:
            # In chunks: a statement takes at most 32,767 parameters on PostgreSQL.
            for start in range(0, len(agent_ids), 1000):
                stmt = (
                    select(EventRow.agent_id, func.count())
                    .where(
                        self._among(EventRow.agent_id, agent_ids[start : start + 1000]),
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
        async with self._reading() as conn:
            return {row.id: from_row(Event, row) for row in await conn.execute(stmt)}

    async def get_event(self, event_id: str) -> Event | None:
        async with self._reading() as conn:
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
        check_limit(limit)
        async with self._reading() as conn:
            after = 0 if since_id is None else await self._seq_of(conn, since_id, agent_id)
            stmt = (
                select(EventRow)
                .where(
                    EventRow.agent_id == agent_id,
                    EventRow.seq > after,
                    *([] if rejected else [shown_to_agent()]),
                )
                .order_by(EventRow.seq)
                .limit(limit)
            )
            return [from_row(Event, row) for row in await conn.execute(stmt)]

    async def latest_events(
        self, agent_id: str, limit: int, *, rejected: bool = True
    ) -> list[Event]:
        """The agent's ``limit`` most recent events, newest first (``rejected``: as above)."""
        check_limit(limit)
        stmt = (
            select(EventRow)
            .where(EventRow.agent_id == agent_id, *([] if rejected else [shown_to_agent()]))
            .order_by(EventRow.seq.desc())
            .limit(limit)
        )
        async with self._reading() as conn:
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
        check_limit(limit)
        async with self._reading() as conn:
            after = None if after_id is None else await self._seq_of(conn, after_id)
            stmt = select(EventRow).where(
                EventRow.channel_id == channel_id,
                EventRow.type.in_(MESSAGE_TYPES),
                shown_to_agent(),
                *([EventRow.agent_id == agent_id] if agent_id is not None else []),
                *([EventRow.direction == direction] if direction is not None else []),
                *([EventRow.seq > after] if after is not None else []),
            )
            # Following: the first `limit` after it; otherwise the newest `limit`, read backwards.
            order = EventRow.seq if after is not None else EventRow.seq.desc()
            rows = await conn.execute(stmt.order_by(order).limit(limit))
            events = [from_row(Event, row) for row in rows]
        return events if after is not None else events[::-1]

    async def came_from(self, agent_id: str, channel_id: str) -> bool:
        """Whether a message the agent was given (not a rejected one) came from this channel."""
        stmt = (
            select(EventRow.id)
            .where(
                EventRow.agent_id == agent_id,
                EventRow.direction == "in",
                EventRow.channel_id == channel_id,
                EventRow.type.in_(MESSAGE_TYPES),
                shown_to_agent(),
            )
            .limit(1)
        )
        async with self._reading() as conn:
            return (await conn.execute(stmt)).first() is not None

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
    def _agent_row_stmt(self) -> Any:
        """Insert a mailbox's agent row (with ``registered_at``), or update the stored one but
        its read cursor and registration time."""
        insert = self._insert(AgentRow)
        return insert.on_conflict_do_update(
            index_elements=[AgentRow.id],
            set_={name: insert.excluded[name] for name in Agent.model_fields if name != "id"},
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
