"""Messages left by phone, by their recording: Twilio posts a <Record>'s action at once, but may
serve the recording only a moment later (its recording status callback says when). A message
whose recording was not there yet waits here, across a gateway restart and past the call's end,
and each recording is marked done once its message was posted (or known lost), so whichever of
the two requests comes second posts nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from agentcomms.store.base import StoreBase
from agentcomms.store.schema import PhoneRecordingRow

# Twilio makes a recording available within minutes: what is older is dropped as new ones come.
_KEPT = timedelta(days=1)
_LOST = 2  # `done`: 0 waiting, 1 posted


@dataclass
class PhoneRecording:
    call: str
    number: str  # who left the message
    agent: str  # whom it is for
    url: str  # Twilio's RecordingUrl
    turn: int  # the prompt it answered, in the call's transcript
    done: bool = False  # posted, or known lost
    lost: bool = False  # never available: the transcript and the log say so


class PhoneRecordings(StoreBase):
    async def keep_recording(self, sid: str, left: PhoneRecording, now: datetime) -> None:
        """Keep the message left in recording `sid`, waiting for its recording (once posted, or
        said lost: :meth:`mark_done`)."""
        values = {
            "call": left.call,
            "number": left.number,
            "agent": left.agent,
            "url": left.url,
            "turn": left.turn,
            "done": 0,
            "updated_at": now,
        }

        def keep(conn: Connection) -> None:
            conn.execute(
                delete(PhoneRecordingRow).where(PhoneRecordingRow.updated_at < now - _KEPT)
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
        if row is None:
            return None
        return PhoneRecording(
            call=row.call,
            number=row.number,
            agent=row.agent,
            url=row.url,
            turn=row.turn,
            done=bool(row.done),
            lost=row.done == _LOST,
        )
