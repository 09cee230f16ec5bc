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
        """Keep the message left in recording `sid` (waiting, or `done`)."""
        values = {
            "call": left.call,
            "number": left.number,
            "agent": left.agent,
            "url": left.url,
            "turn": left.turn,
            "done": _LOST if left.lost else int(left.done),
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
