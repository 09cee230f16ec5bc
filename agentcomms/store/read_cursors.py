"""An agent's read cursor: the messages `check_messages` shows it, oldest first, and how far it
has read (moved forward only, once they were shown)."""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

from sqlalchemy import ColumnElement, bindparam, func, literal, or_, select
from sqlalchemy.engine import Connection

from agentcomms.errors import EventNotFound
from agentcomms.models import Agent, Event, utcnow
from agentcomms.store.base import StoreBase, check_limit
from agentcomms.store.driver import DriverStatement
from agentcomms.store.records import AGENT_COLUMNS, from_row, row_values
from agentcomms.store.schema import AgentRow, EventRow

MESSAGE_TYPES = ("human_message", "agent_message")


def shown_to_agent() -> ColumnElement[bool]:
    # Rejected: never typed, and not for the agent's eyes either. The allowlist refused its
    # sender, or the deployment did not sign it (a forgery: showing its text would do what
    # typing it would), or it was a voice note nobody could transcribe, or it came past the
    # mailbox's hard cap. Kept for the operator (`events`, `trace`, with the reason in error).
    return EventRow.status != "rejected"


# An agent's messages after its read cursor, oldest first. The message types are literals, not
# one expanding list, so the statement compiles once to plain SQL for the driver connection.
_UNREAD = (
    select(EventRow)
    .where(
        EventRow.agent_id == bindparam("agent_id"),
        EventRow.direction == "in",
        EventRow.type.in_([literal(t) for t in MESSAGE_TYPES]),
        shown_to_agent(),
        EventRow.seq
        > func.coalesce(
            select(AgentRow.read_cursor)
            .where(AgentRow.id == bindparam("agent_id"))
            .scalar_subquery(),
            0,
        ),
    )
    .order_by(EventRow.seq)
    .limit(bindparam("limit"))
)


# The seq of one of the agent's events (None: no such event of this agent's).
_OWN_SEQ = select(EventRow.seq).where(
    EventRow.id == bindparam("event_id"), EventRow.agent_id == bindparam("agent_id")
)


class ReadCursors(StoreBase):
    async def unread_messages(self, agent_id: str, limit: int) -> tuple[list[Event], bool]:
        """Messages to the agent after its read cursor, oldest first, and whether more wait.

        Reading does not move the cursor: :meth:`advance_read_cursor` does, once they were shown.
        """
        check_limit(limit)
        asked = {"agent_id": agent_id, "limit": limit + 1}  # one more tells whether more wait
        # Asked at every check_messages, mostly to find nothing: on a SQLite file, on the
        # reader's driver connection (one thread hop, where the async driver took eight).
        if self._reader is not None:
            query = self._unread_query
            await self._queued_written()
            rows = await self._read_on_driver(lambda cursor: query.rows(cursor, asked))
            events = [Event.model_validate(row) for row in rows]
        else:
            async with self._reading() as conn:
                events = [from_row(Event, row) for row in await conn.execute(_UNREAD, asked)]
        return events[:limit], len(events) > limit

    async def advance_read_cursor(self, agent_id: str, event_id: str) -> bool:
        """Mark the agent's messages up to ``event_id`` as read; True if the cursor moved.

        The cursor only moves forward, so a stale acknowledgement is harmless. An agent without a
        row yet (messages may arrive before it registers) gets one, offline.
        """

        now = utcnow()
        row = {**row_values(Agent(id=agent_id, updated_at=now)), "registered_at": now}
        asked = {"event_id": event_id, "agent_id": agent_id}
        # Made at every check_messages that returns something: on a SQLite file, on the writer's
        # driver connection (0.1 ms of CPU, where a SQLAlchemy transaction took 1.0).
        if self._driver is not None:
            find = self._on_driver(_OWN_SEQ, ("event_id", "agent_id"))
            move = self._on_driver(self._advance_cursor_stmt, (*AGENT_COLUMNS, "read_cursor"))

            def advance_on_driver(cursor: sqlite3.Cursor) -> bool:
                seq = find.scalar(cursor, asked)
                return seq is not None and bool(move.run(cursor, [{**row, "read_cursor": seq}]))

            if await self._transact_on_driver(advance_on_driver):
                return True
        else:

            def advance(conn: Connection) -> bool:
                seq = conn.execute(_OWN_SEQ, asked).scalar_one_or_none()
                if seq is None:
                    return False
                moved = conn.execute(self._advance_cursor_stmt, {**row, "read_cursor": seq})
                return moved.first() is not None

            if await self._transact(advance):
                return True
        # Not moved: a stale or retried acknowledgement, or an event that is not the agent's.
        async with self._reading() as conn:
            if (await conn.execute(_OWN_SEQ, asked)).first() is None:
                raise EventNotFound(event_id, agent_id)
        return False

    @functools.cached_property
    def _advance_cursor_stmt(self) -> Any:
        """Insert an agent row holding a read cursor, or move the stored one forward only."""
        insert = self._insert(AgentRow)
        return insert.on_conflict_do_update(
            index_elements=[AgentRow.id],
            set_={"read_cursor": insert.excluded.read_cursor},
            where=or_(
                AgentRow.read_cursor.is_(None), AgentRow.read_cursor < insert.excluded.read_cursor
            ),
        ).returning(AgentRow.id)

    @functools.cached_property
    def _unread_query(self) -> DriverStatement:
        assert self._writer is not None
        return DriverStatement(_UNREAD, self._writer, ["agent_id", "limit"])
