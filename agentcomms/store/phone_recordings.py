"""Messages left by phone, by their recording: Twilio posts a <Record>'s action at once, but may
serve the recording only a moment later (its recording status callback says when). A message
whose recording was not there yet waits here, across a gateway restart and past the call's end,
and each recording is marked done once its message was posted (or known lost), so whichever of
the two requests comes second posts nothing. One Twilio said is complete but would not serve
is kept here too while the gateway fetches it again (Twilio says it once), so a restarted
gateway carries on fetching it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection, Row

from agentcomms.store.base import StoreBase
from agentcomms.store.schema import PhoneRecordingRow

# Twilio makes a recording available within minutes: what is older is dropped as new ones come.
_KEPT = timedelta(days=1)
# `done`: 0 waiting, 1 posted, 2 known lost; 3 complete, the gateway fetching it again since
# `updated_at` (never pruned: it is posted or said lost within minutes, a restart included).
_LOST = 2
_FETCHING = 3


@dataclass
class PhoneRecording:
    call: str
    number: str  # who left the message
    agent: str  # whom it is for
    url: str  # Twilio's RecordingUrl
    turn: int  # the prompt it answered, in the call's transcript
    done: bool = False  # posted, or known lost
    lost: bool = False  # never available: the transcript and the log say so
    # Complete, but not served when Twilio said so: the gateway fetches it again (since when).
    fetching_since: datetime | None = None


class PhoneRecordings(StoreBase):
    async def keep_recording(
        self, sid: str, left: PhoneRecording, now: datetime, *, fetching: bool = False
    ) -> None:
        """Keep the message left in recording `sid`, waiting for its recording, or (`fetching`)
        for the gateway to fetch it again, from `now` on (once posted, or said lost:
        :meth:`mark_done`)."""
        values = {
            "call": left.call,
            "number": left.number,
            "agent": left.agent,
            "url": left.url,
            "turn": left.turn,
            "done": _FETCHING if fetching else 0,
            "updated_at": now,
        }

        def keep(conn: Connection) -> None:
            conn.execute(
                delete(PhoneRecordingRow).where(
                    PhoneRecordingRow.updated_at < now - _KEPT,
                    PhoneRecordingRow.done != _FETCHING,
                )
            )
            conn.execute(
                self._insert(PhoneRecordingRow)
                .values(recording=sid, **values)
                .on_conflict_do_update(index_elements=["recording"], set_=values)
            )

        await self._transact(keep)

    async def mark_done(self, sid: str, now: datetime, *, lost: bool = False) -> None:
        """Recording `sid`'s message was posted (or, `lost`, said lost in the transcript and the
        log): whichever request about it comes next posts nothing. A message posted at once
        never waited here, so its row is made, saying only that."""
        done = {"done": _LOST if lost else 1, "updated_at": now}
        blank = {"call": "", "number": "", "agent": "", "url": "", "turn": 0}

        def mark(conn: Connection) -> None:
            conn.execute(
                self._insert(PhoneRecordingRow)
                .values(recording=sid, **blank, **done)
                .on_conflict_do_update(index_elements=["recording"], set_=done)
            )

        await self._transact(mark)

    async def recording(self, sid: str) -> PhoneRecording | None:
        stmt = select(PhoneRecordingRow).where(PhoneRecordingRow.recording == sid)
        async with self._engine.connect() as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else _recording(row)

    async def recording_began(self, call: str, turn: int) -> bool:
        """Whether a recording answering prompt `turn` of `call` began (Twilio said so): the
        message it holds may still come after the call's end."""
        stmt = select(PhoneRecordingRow.recording).where(
            PhoneRecordingRow.call == call, PhoneRecordingRow.turn == turn
        )
        async with self._engine.connect() as conn:
            return (await conn.execute(stmt.limit(1))).first() is not None

    async def recordings_fetching(self) -> dict[str, PhoneRecording]:
        """The recordings the gateway is fetching again, by sid (a restarted one carries on)."""
        stmt = select(PhoneRecordingRow).where(PhoneRecordingRow.done == _FETCHING)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return {row.recording: _recording(row) for row in rows}


def _recording(row: Row[Any]) -> PhoneRecording:
    fetching = row.done == _FETCHING
    return PhoneRecording(
        call=row.call,
        number=row.number,
        agent=row.agent,
        url=row.url,
        turn=row.turn,
        done=row.done in (1, _LOST),
        lost=row.done == _LOST,
        fetching_since=row.updated_at if fetching else None,
    )
