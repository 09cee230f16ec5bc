"""Email in: how far each IMAP mailbox was read. A message is handled (kept for an agent, or
refused and recorded) before the cursor passes its UID, so a restart reads on from the first
UID not handled, and a message is never handled twice however often the gateway restarts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from agentcomms.store.base import StoreBase
from agentcomms.store.schema import MailCursorRow
from agentcomms.store.senders import ChatSenders


@dataclass(frozen=True)
class MailCursor:
    uidvalidity: int
    last_uid: int


class MailCursors(StoreBase):
    async def mail_cursor(self, mailbox: str) -> MailCursor | None:
        stmt = select(MailCursorRow).where(MailCursorRow.mailbox == mailbox)
        async with self._engine.connect() as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else MailCursor(row.uidvalidity, row.last_uid)

    async def keep_mail_cursor(self, mailbox: str, cursor: MailCursor, now: datetime) -> None:
        values = {
            "uidvalidity": cursor.uidvalidity,
            "last_uid": cursor.last_uid,
            "updated_at": now,
        }

        def keep(conn: Connection) -> None:
            conn.execute(
                self._insert(MailCursorRow)
                .values(mailbox=mailbox, **values)
                .on_conflict_do_update(index_elements=["mailbox"], set_=values)
            )

        await self._transact(keep)


class ChatMemory(ChatSenders, MailCursors):
    """What the chat side keeps between messages: senders admitted, and how far each mailbox
    was read."""
