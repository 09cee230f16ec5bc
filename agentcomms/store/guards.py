"""What the projection remembers so that a restart forgets nothing an attacker could use again.

Temporal authenticates no one: a workflow can be terminated and started afresh, and a fresh run
remembers nothing of the last one. So the projection keeps, outside any workflow: the time of the
newest registration a mailbox obeyed and the messages it typed (read back by a mailbox started
afresh), the time of the newest registration or unregister the deployment signed for each agent
(an older registration is no pane to type into, whatever a mailbox's state says), the signed
inputs already used once (a call's input, an outbox item: a copy used again
elsewhere is refused), the hour's counts of what strangers cost (kept across a restart of the
gateway), and the wrong PINs keyed at the phone menu, by the caller's number: a call gets one
try, so a guesser simply calls again, and only a count that outlives the call stops them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import bindparam, delete, or_, select, update
from sqlalchemy.engine import Connection

from agentcomms.store.base import StoreBase
from agentcomms.store.driver import DriverStatement
from agentcomms.store.schema import AgentRow, EventRow, PhonePinRow, SpentRow, StrangerCountRow

# Wrong PINs this long ago, with no lockout running, are forgotten as new ones come.
_PINS_FORGOTTEN = timedelta(days=1)
# Stranger counts older than this many hours are dropped as new hours start.
_HOURS_KEPT = 2
# The `spent` rows that hold, per agent, when its newest signed registration or unregister was made.
_PANE_SIGNED = "pane-signed"
_NEWEST_PANE_SIGNED = select(SpentRow.at).where(
    SpentRow.kind == _PANE_SIGNED, SpentRow.id == bindparam("agent_id")
)


@dataclass(frozen=True)
class WrongPin:
    """A wrong PIN counted: how many in a row from the number, and until when it is locked out
    (None: not locked). `locked_now`: this one locked it (the human is told once)."""

    failures: int
    locked_until: datetime | None
    locked_now: bool = False


class Guards(StoreBase):
    # ---- a mailbox started afresh ---------------------------------------------------------------

    async def pane_changed_at(self, agent_id: str) -> datetime | None:
        """When the newest registration or unregister the agent's mailbox obeyed was made."""
        stmt = select(AgentRow.pane_changed_at).where(AgentRow.id == agent_id)
        async with self._engine.connect() as conn:
            return (await conn.execute(stmt)).scalar_one_or_none()

    async def typed_since(self, agent_id: str, since: datetime, limit: int) -> list[str]:
        """The ids of the agent's messages typed that were made since `since`, newest first."""
        stmt = (
            select(EventRow.id)
            .where(
                EventRow.agent_id == agent_id,
                EventRow.status == "delivered",
                EventRow.direction == "in",
                EventRow.created_at >= since,
            )
            .order_by(EventRow.seq.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return list((await conn.execute(stmt)).scalars())

    # ---- the newest pane the deployment gave an agent ----------------------------------------

    async def pane_signed(self, agent_id: str, at: datetime) -> None:
        """The deployment signed a registration or unregister of `agent_id` made at `at`: kept
        when it is newer than the one recorded."""

        def keep(conn: Connection) -> None:
            stmt = self._insert(SpentRow).values(kind=_PANE_SIGNED, id=agent_id, by="", at=at)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["kind", "id"],
                    set_={"at": stmt.excluded.at},
                    where=SpentRow.at < stmt.excluded.at,
                )
            )

        await self._transact(keep)

    async def newest_pane_signed(self, agent_id: str) -> datetime | None:
        """When the newest registration or unregister the deployment signed for the agent was
        made (None: none recorded)."""
        asked = {"agent_id": agent_id}
        # Asked before every delivery: on a SQLite file, on the reader's driver connection.
        if self._reader is not None:
            query = self._newest_pane_signed_query
            return await self._read_on_driver(lambda cursor: query.scalar(cursor, asked))
        async with self._engine.connect() as conn:
            return (await conn.execute(_NEWEST_PANE_SIGNED, asked)).scalar_one_or_none()

    @functools.cached_property
    def _newest_pane_signed_query(self) -> DriverStatement:
        assert self._writer is not None
        return DriverStatement(_NEWEST_PANE_SIGNED, self._writer, ["agent_id"])

    # ---- signed inputs that act once ------------------------------------------------------------

    async def spend(self, kind: str, input_id: str, by: str, now: datetime) -> str:
        """Mark the input `kind`/`input_id` used by `by`, unless someone used it first: who did
        (`by` itself when it was the first, or asks again)."""

        def take(conn: Connection) -> str:
            conn.execute(
                self._insert(SpentRow)
                .values(kind=kind, id=input_id, by=by, at=now)
                .on_conflict_do_nothing(index_elements=["kind", "id"])
            )
            first = select(SpentRow.by).where(SpentRow.kind == kind, SpentRow.id == input_id)
            return str(conn.execute(first).scalar_one())

        return await self._transact(take)

    # ---- what strangers cost --------------------------------------------------------------------

    async def take_stranger_cost(self, hour: int, limits: dict[str, int]) -> str | None:
        """Count one more against each key's limit for `hour`, when every key is under it
        (None); otherwise count nothing and name a key that reached its limit."""

        def take(conn: Connection) -> str | None:
            conn.execute(
                delete(StrangerCountRow).where(StrangerCountRow.hour <= hour - _HOURS_KEPT)
            )
            mine = (StrangerCountRow.hour == hour) & StrangerCountRow.key.in_(list(limits))
            counts = {
                key: count
                for key, count in conn.execute(
                    select(StrangerCountRow.key, StrangerCountRow.count).where(mine)
                )
            }
            for key, most in limits.items():
                if counts.get(key, 0) >= most:
                    return key
            for key in limits:
                stmt = self._insert(StrangerCountRow).values(hour=hour, key=key, count=1)
                conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["hour", "key"],
                        set_={"count": StrangerCountRow.count + 1},
                    )
                )
            return None

        return await self._transact(take)

    async def give_back_stranger_cost(self, hour: int, key: str) -> None:
        """Count one less for `key` in `hour` (what was taken was not spent)."""

        def give(conn: Connection) -> None:
            conn.execute(
                update(StrangerCountRow)
                .where(
                    StrangerCountRow.hour == hour,
                    StrangerCountRow.key == key,
                    StrangerCountRow.count > 0,
                )
                .values(count=StrangerCountRow.count - 1)
            )

        await self._transact(give)

    # ---- wrong PINs on the phone ---------------------------------------------------------------

    async def pin_locked_until(self, number: str, now: datetime) -> datetime | None:
        """Until when calls from `number` are refused without asking a PIN (None: they are not)."""
        stmt = select(PhonePinRow.locked_until).where(PhonePinRow.number == number)
        async with self._engine.connect() as conn:
            until = (await conn.execute(stmt)).scalar_one_or_none()
        return until if until is not None and until > now else None

    async def wrong_pin(
        self, number: str, now: datetime, *, tries: int, lockout: timedelta
    ) -> WrongPin:
        """Count a wrong PIN from `number`; the `tries`-th in a row locks it out for `lockout`.
        One keyed while it is locked out already (a call that was asked before the lockout
        began) counts nothing more."""
        row = PhonePinRow

        def count(conn: Connection) -> WrongPin:
            unlocked = or_(row.locked_until.is_(None), row.locked_until <= now)
            conn.execute(delete(row).where(row.updated_at < now - _PINS_FORGOTTEN, unlocked))
            stmt = self._insert(row).values(
                number=number, failures=1, locked_until=None, updated_at=now
            )
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["number"],
                    set_={"failures": row.failures + 1, "updated_at": now},
                    where=unlocked,
                )
            )
            failures, until = conn.execute(
                select(row.failures, row.locked_until).where(row.number == number)
            ).one()
            if until is not None and until > now:
                return WrongPin(failures=failures, locked_until=until)
            if failures < tries:
                return WrongPin(failures=failures, locked_until=None)
            until = now + lockout
            conn.execute(
                update(row).where(row.number == number).values(failures=0, locked_until=until)
            )
            return WrongPin(failures=failures, locked_until=until, locked_now=True)

        return await self._transact(count)

    async def right_pin(self, number: str) -> None:
        """The right PIN from `number`: its wrong ones are forgotten."""

        def forget(conn: Connection) -> None:
            conn.execute(delete(PhonePinRow).where(PhonePinRow.number == number))

        await self._transact(forget)
