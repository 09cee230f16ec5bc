"""What changed in the projection since a reader last looked: for views kept live (the console),
which read it once for everyone watching, never once per agent.

On PostgreSQL the tables announce their changes themselves (triggers, revision 0012): each
event inserted, event status changed and agent row written is a notice on
``agentcomms_changes``, delivered as its transaction commits, in commit order. A reader that
listens (:meth:`Changes.notices`) then reads exactly those rows, and misses none: reading "every
seq after the last seen" would skip a seq that commits after a higher one (two agents' events
written at once). SQLite has no notices between processes; its writes commit one at a time, in
seq order, so reading after the last seen seq misses nothing there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from agentcomms.models import Agent, Event
from agentcomms.store.base import StoreBase, check_limit
from agentcomms.store.records import from_row, from_rows
from agentcomms.store.schema import AgentRow, EventRow

NOTICES = "agentcomms_changes"
# A listener that falls this far behind is told to start over (None), rather than grow.
NOTICES_BACKLOG = 10_000


@dataclass
class Notices:
    """What the notices said changed since they were last taken."""

    events: set[int] = field(default_factory=set)  # seqs inserted
    statuses: set[int] = field(default_factory=set)  # seqs whose status changed
    agents: set[str] = field(default_factory=set)  # agent rows written

    def add(self, payload: str) -> None:
        kind, key = payload[:1], payload[1:]
        if kind == "e" and key.isdigit():
            self.events.add(int(key))
        elif kind == "s" and key.isdigit():
            self.statuses.add(int(key))
        elif kind == "a" and key:
            self.agents.add(key)


class Changes(StoreBase):
    @contextlib.asynccontextmanager
    async def notices(self) -> AsyncIterator[asyncio.Queue[str | None] | None]:
        """The tables' change notices as they commit (PostgreSQL), each payload in a queue; None
        in it means the listening connection was lost (read everything again). Yields None on
        SQLite, which has none."""
        if self._dialect != "postgresql":
            yield None
            return
        heard: asyncio.Queue[str | None] = asyncio.Queue(NOTICES_BACKLOG)

        def told(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            try:
                heard.put_nowait(payload)
            except asyncio.QueueFull:
                _lost()

        def _lost(*_: Any) -> None:
            while not heard.empty():
                heard.get_nowait()
            heard.put_nowait(None)

        async with self._engine.connect() as conn:
            raw = (await conn.get_raw_connection()).driver_connection
            assert raw is not None
            await raw.add_listener(NOTICES, told)
            raw.add_termination_listener(_lost)
            try:
                yield heard
            finally:
                raw.remove_termination_listener(_lost)
                with contextlib.suppress(Exception):  # the connection may be gone already
                    await raw.remove_listener(NOTICES, told)

    async def events_by_seq(self, seqs: set[int]) -> list[tuple[int, Event]]:
        """The events of these seqs, by seq."""
        stmt = (
            select(EventRow).where(self._among(EventRow.seq, sorted(seqs))).order_by(EventRow.seq)
        )
        async with self._engine.connect() as conn:
            return [(row.seq, from_row(Event, row)) for row in await conn.execute(stmt)]

    async def statuses_by_seq(self, seqs: set[int]) -> list[tuple[str, str, str]]:
        """(id, agent, status) of the events of these seqs."""
        stmt = select(EventRow.id, EventRow.agent_id, EventRow.status).where(
            self._among(EventRow.seq, sorted(seqs))
        )
        async with self._engine.connect() as conn:
            return [(i, a, st) for i, a, st in await conn.execute(stmt)]

    async def agents_by_id(self, agent_ids: set[str]) -> list[Agent]:
        """The rows of these agents, by id."""
        stmt = (
            select(AgentRow)
            .where(self._among(AgentRow.id, sorted(agent_ids)))
            .order_by(AgentRow.id)
        )
        async with self._engine.connect() as conn:
            return from_rows(Agent, await conn.execute(stmt))

    async def agents_changed_since(self, since: datetime) -> list[Agent]:
        """Agents whose row was written at or after ``since`` (the writer's clock), by id."""
        stmt = select(AgentRow).where(AgentRow.updated_at >= since).order_by(AgentRow.id)
        async with self._engine.connect() as conn:
            return from_rows(Agent, await conn.execute(stmt))

    async def last_seq(self) -> int:
        """The newest event's place in the order (0 with none)."""
        async with self._engine.connect() as conn:
            return int((await conn.execute(select(func.max(EventRow.seq)))).scalar() or 0)

    async def events_after_seq(self, seq: int, limit: int) -> list[tuple[int, Event]]:
        """Up to ``limit`` events of any agent inserted after ``seq``, oldest first, each with
        its place in the order."""
        check_limit(limit)
        stmt = select(EventRow).where(EventRow.seq > seq).order_by(EventRow.seq).limit(limit)
        async with self._engine.connect() as conn:
            return [(row.seq, from_row(Event, row)) for row in await conn.execute(stmt)]

    async def statuses_after_seq(self, seq: int) -> list[tuple[str, str, str]]:
        """(id, agent, status) of every event after ``seq``: the recent ones a live page shows,
        whose status moves on (typed, failed) without a new row."""
        stmt = select(EventRow.id, EventRow.agent_id, EventRow.status).where(EventRow.seq > seq)
        async with self._engine.connect() as conn:
            return [(i, a, st) for i, a, st in await conn.execute(stmt)]

    async def last_event_times(self) -> dict[str, datetime]:
        """When each agent's newest event was made, by agent (one read for all of them)."""
        newest = select(func.max(EventRow.seq)).group_by(EventRow.agent_id)
        stmt = select(EventRow.agent_id, EventRow.created_at).where(EventRow.seq.in_(newest))
        async with self._engine.connect() as conn:
            return {agent_id: at for agent_id, at in await conn.execute(stmt)}

    async def last_replies(self) -> dict[str, Event]:
        """Each agent's newest message out (to a human or a chat), by agent (one read)."""
        newest = (
            select(func.max(EventRow.seq))
            .where(EventRow.direction == "out", EventRow.type == "agent_message")
            .group_by(EventRow.agent_id)
        )
        stmt = select(EventRow).where(EventRow.seq.in_(newest))
        async with self._engine.connect() as conn:
            return {row.agent_id: from_row(Event, row) for row in await conn.execute(stmt)}
