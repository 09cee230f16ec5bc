"""Agents, channels and calls in the projection: rows written whole as their workflows (or the
gateway) see them, and read back."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select, text

from agentcomms.models import ACTIVE_STATUSES, Agent, CallRecord, Channel, utcnow
from agentcomms.store.base import StoreBase, check_limit
from agentcomms.store.records import from_row, from_rows, row_values
from agentcomms.store.schema import AgentRow, CallRow, ChannelRow, EventRow


class Directory(StoreBase):
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
            return from_rows(Agent, await conn.execute(stmt))

    async def holds_nothing(self) -> bool:
        """Whether no agent and no event is stored: a database new, or deleted and made again."""
        async with self._engine.connect() as conn:
            for table in (AgentRow, EventRow):
                if (await conn.execute(select(table).limit(1))).first() is not None:
                    return False
        return True

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

    # -- calls ---------------------------------------------------------------------------------

    async def upsert_call(self, call: CallRecord) -> None:
        """Write a call's row as its workflow sees it now (a retry writes the same again)."""
        await self._upsert(CallRow, call.model_dump(), key="id")

    async def claim_line(self, call: CallRecord, *, since: datetime) -> str | None:
        """Take the human's phone (`call.phone_number`) for `call`, unless another call on it,
        begun after `since`, is still up: that call's id. Otherwise None, and `call`'s row is
        written (as it is, or kept as its workflow wrote it), so the next to ask finds it busy.
        Two asking at the same moment are served one after the other."""

        def take(conn: Connection) -> str | None:
            if self._dialect == "postgresql":  # SQLite's write lock is taken at BEGIN already
                lock = text("SELECT pg_advisory_xact_lock(hashtext(:line))")
                conn.execute(lock, {"line": f"agentcomms/line/{call.phone_number}"})
            busy = conn.execute(
                select(CallRow.id)
                .where(
                    CallRow.phone_number == call.phone_number,
                    CallRow.status.in_(ACTIVE_STATUSES),
                    CallRow.started_at > since,
                    CallRow.id != call.id,
                )
                .order_by(CallRow.started_at)
                .limit(1)
            ).scalar_one_or_none()
            if busy is not None:
                return str(busy)
            conn.execute(
                self._insert(CallRow)
                .values(call.model_dump())
                .on_conflict_do_nothing(index_elements=["id"])
            )
            return None

        return await self._transact(take)

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
        check_limit(limit)
        stmt = select(CallRow).order_by(CallRow.started_at.desc(), CallRow.id.desc()).limit(limit)
        if agent_id is not None:
            stmt = stmt.where(CallRow.agent_id == agent_id)
        if active:
            stmt = stmt.where(CallRow.status.in_(ACTIVE_STATUSES))
        if phone_number is not None:
            stmt = stmt.where(CallRow.phone_number == phone_number)
        async with self._engine.connect() as conn:
            return from_rows(CallRecord, await conn.execute(stmt))
