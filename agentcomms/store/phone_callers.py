"""Calls coming in, between their steps: each step of a call is a request of its own (a Twilio
webhook, a line typed at the local phone), so who called, whether the PIN was right and which
requests are still to be offered are kept here, where a restarted gateway finds them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from agentcomms.store.base import StoreBase
from agentcomms.store.schema import PhoneCallerRow

# A call coming in is over long before this: what is older is dropped as new calls come.
_KEPT = timedelta(days=1)


@dataclass
class PhoneCaller:
    number: str
    started_at: datetime
    admitted: bool = False
    pending: list[str] = field(default_factory=list)  # approval ids still to offer
    turn: int = 0  # the prompt being answered, in the call's transcript
    awaits: str = ""  # what that prompt waits for: "pin", "key" or "message"


class PhoneCallers(StoreBase):
    async def keep_caller(self, call: str, caller: PhoneCaller, now: datetime) -> None:
        """Keep the call's progress (made or changed by its latest step)."""
        values = {
            "number": caller.number,
            "admitted": int(caller.admitted),
            "pending": list(caller.pending),
            "started_at": caller.started_at,
            "turn": caller.turn,
            "awaits": caller.awaits,
            "updated_at": now,
        }

        def keep(conn: Connection) -> None:
            conn.execute(delete(PhoneCallerRow).where(PhoneCallerRow.updated_at < now - _KEPT))
            conn.execute(
                self._insert(PhoneCallerRow)
                .values(call=call, **values)
                .on_conflict_do_update(index_elements=["call"], set_=values)
            )

        await self._transact(keep)

    async def caller(self, call: str) -> PhoneCaller | None:
        stmt = select(PhoneCallerRow).where(PhoneCallerRow.call == call)
        async with self._engine.connect() as conn:
            row = (await conn.execute(stmt)).first()
        if row is None:
            return None
        return PhoneCaller(
            number=row.number,
            started_at=row.started_at,
            admitted=bool(row.admitted),
            pending=list(row.pending or []),
            turn=row.turn,
            awaits=row.awaits,
        )

    async def forget_caller(self, call: str) -> None:
        """The call is over."""

        def forget(conn: Connection) -> None:
            conn.execute(delete(PhoneCallerRow).where(PhoneCallerRow.call == call))

        await self._transact(forget)
