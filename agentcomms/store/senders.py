"""The chat allowlist in the projection: senders admitted by a pairing code, and the codes
offered to senders not admitted yet."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection

from agentcomms.models import Event
from agentcomms.store.base import StoreBase
from agentcomms.store.records import ChatSender, from_row
from agentcomms.store.schema import ChatSenderRow, EventRow, PairingCodeRow

# A stranger's messages recorded while their code waited are few (gateway.strangers bounds
# them per hour); more than this is not a conversation to pass on.
HELD_MOST = 100


def not_allowed(provider: str, sender_id: str) -> str:
    """Why a message of a sender nobody admitted was refused (the event's ``error``)."""
    return f"sender {provider}:{sender_id} is not allowed"


class ChatSenders(StoreBase):
    async def sender_admitted(self, provider: str, sender_id: str) -> bool:
        """Whether the sender was admitted by pairing and not revoked since."""
        stmt = select(ChatSenderRow.sender_id).where(
            ChatSenderRow.provider == provider,
            ChatSenderRow.sender_id == sender_id,
            ChatSenderRow.revoked_at.is_(None),
        )
        async with self._engine.connect() as conn:
            return (await conn.execute(stmt)).first() is not None

    async def offer_pairing(self, sender: ChatSender, now: datetime) -> tuple[str, bool]:
        """The sender's pending pairing code, and whether it is new.

        An unexpired code is kept (so a stranger who writes ten times is answered once);
        otherwise ``sender.code`` is stored until ``sender.expires_at``.
        """
        assert sender.code is not None and sender.expires_at is not None
        mine = (PairingCodeRow.provider == sender.provider) & (
            PairingCodeRow.sender_id == sender.sender_id
        )
        code, expires_at = sender.code, sender.expires_at

        def offer(conn: Connection) -> tuple[str, bool]:
            row = conn.execute(select(PairingCodeRow).where(mine)).first()
            if row is not None and row.expires_at > now:
                return row.code, False
            conn.execute(delete(PairingCodeRow).where(mine))
            conn.execute(
                self._insert(PairingCodeRow).values(
                    code=code,
                    provider=sender.provider,
                    sender_id=sender.sender_id,
                    sender_name=sender.sender_name,
                    chat_id=sender.chat_id,
                    created_at=now,
                    expires_at=expires_at,
                )
            )
            return code, True

        return await self._transact(offer)

    async def pending_by_code(self, code: str, now: datetime) -> ChatSender | None:
        """The sender an unexpired pairing code was given to, not admitted (for the human to
        see who they would admit); None for an unknown or expired code."""
        stmt = select(PairingCodeRow).where(
            PairingCodeRow.code == code, PairingCodeRow.expires_at > now
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(stmt)).first()
        return from_row(ChatSender, row) if row else None

    async def admit_by_code(self, code: str, now: datetime) -> ChatSender | None:
        """Admit the sender a pairing code was given to; None for an unknown or expired code."""

        def admit(conn: Connection) -> ChatSender | None:
            row = conn.execute(select(PairingCodeRow).where(PairingCodeRow.code == code)).first()
            if row is None:
                return None
            conn.execute(delete(PairingCodeRow).where(PairingCodeRow.code == code))
            if row.expires_at <= now:
                return None
            values = {
                "provider": row.provider,
                "sender_id": row.sender_id,
                "sender_name": row.sender_name,
                "chat_id": row.chat_id,
                "admitted_at": now,
                "revoked_at": None,
            }
            stmt = self._insert(ChatSenderRow).values(values)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=[ChatSenderRow.provider, ChatSenderRow.sender_id],
                    set_={
                        k: stmt.excluded[k] for k in values if k not in ("provider", "sender_id")
                    },
                )
            )
            return ChatSender.model_validate(values | {"created_at": row.created_at})

        return await self._transact(admit)

    async def held_messages(self, sender: ChatSender, since: datetime) -> list[Event]:
        """What ``sender`` wrote in their chat since ``since`` that was refused because they were
        not admitted (recorded, never shown to an agent), oldest first."""
        stmt = (
            select(EventRow)
            .where(
                EventRow.channel_id == f"{sender.provider}:{sender.chat_id}",
                EventRow.type == "human_message",
                EventRow.status == "rejected",
                EventRow.created_at >= since,
            )
            .order_by(EventRow.seq)
            .limit(HELD_MOST)
        )
        async with self._engine.connect() as conn:
            rows = [from_row(Event, row) for row in await conn.execute(stmt)]
        refused = not_allowed(sender.provider, sender.sender_id)
        # In a group chat others write too; a voice note nobody heard was refused for that.
        return [e for e in rows if e.error == refused]

    async def revoke_sender(self, provider: str, sender_id: str, now: datetime) -> bool:
        """Revoke an admitted sender (kept, for the record); True when one was admitted."""
        stmt = (
            update(ChatSenderRow)
            .where(
                ChatSenderRow.provider == provider,
                ChatSenderRow.sender_id == sender_id,
                ChatSenderRow.revoked_at.is_(None),
            )
            .values(revoked_at=now)
        )
        return await self._transact(lambda conn: conn.execute(stmt).rowcount > 0)

    async def list_senders(self) -> list[ChatSender]:
        """Admitted (and revoked) senders, then those holding a pairing code."""
        async with self._engine.connect() as conn:
            admitted = await conn.execute(
                select(ChatSenderRow).order_by(ChatSenderRow.provider, ChatSenderRow.sender_id)
            )
            senders = [from_row(ChatSender, row) for row in admitted]
            pending = await conn.execute(select(PairingCodeRow).order_by(PairingCodeRow.created_at))
            senders += [from_row(ChatSender, row) for row in pending]
        return senders
