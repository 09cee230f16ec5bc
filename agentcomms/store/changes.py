"""What changed in the projection since a reader last looked: for views kept live (the console),
which read it once for everyone watching, never once per agent."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from agentcomms.models import Agent, Event
from agentcomms.store.base import StoreBase, check_limit
from agentcomms.store.records import from_row
from agentcomms.store.schema import AgentRow, EventRow


class Changes(StoreBase):
    async def agents_changed_since(self, since: datetime) -> list[Agent]:
        """Agents whose row was written at or after ``since`` (the writer's clock), by id."""
        stmt = select(AgentRow).where(AgentRow.updated_at >= since).order_by(AgentRow.id)
        async with self._engine.connect() as conn:
            return [from_row(Agent, row) for row in await conn.execute(stmt)]

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
