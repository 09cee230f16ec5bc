"""Which chat message shows which approval: the gateway posts a request to each of the agent's
chats and, once the approval is decided, edits each message (its buttons gone) or tells each
chat of plain text. Kept in the projection, not the gateway's memory, so an approval decided
after a gateway restart (in the terminal, on another surface, by its timeout) still clears
every chat's buttons; taken once, so two deciders never edit twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.engine import Connection

from agentcomms.store.base import StoreBase
from agentcomms.store.schema import ApprovalPostRow

# A post no decision took by then belongs to an approval that ended unheard (its gateway and
# hook both gone); dropped as new ones are recorded. Approvals wait minutes, not weeks.
POSTS_KEPT = timedelta(days=7)


@dataclass(frozen=True)
class ApprovalPost:
    provider: str
    chat_id: str
    message_id: str


class ApprovalPosts(StoreBase):
    async def record_approval_post(
        self, approval_id: str, post: ApprovalPost, now: datetime
    ) -> None:
        """Remember that `post` shows `approval_id` (again: the newer message)."""
        stmt = self._insert(ApprovalPostRow).values(
            approval_id=approval_id,
            provider=post.provider,
            chat_id=post.chat_id,
            message_id=post.message_id,
            posted_at=now,
        )
        upsert = stmt.on_conflict_do_update(
            index_elements=["approval_id", "provider", "chat_id"],
            set_={"message_id": stmt.excluded.message_id, "posted_at": now},
        )

        def record(conn: Connection) -> None:
            conn.execute(
                delete(ApprovalPostRow).where(ApprovalPostRow.posted_at < now - POSTS_KEPT)
            )
            conn.execute(upsert)

        await self._transact(record)

    async def take_approval_posts(self, approval_id: str) -> list[ApprovalPost]:
        """The posts of `approval_id`, forgotten as they are handed over: whoever asks first
        gets them, anyone after gets none."""
        stmt = (
            delete(ApprovalPostRow)
            .where(ApprovalPostRow.approval_id == approval_id)
            .returning(
                ApprovalPostRow.provider, ApprovalPostRow.chat_id, ApprovalPostRow.message_id
            )
        )

        def take(conn: Connection) -> list[ApprovalPost]:
            return [ApprovalPost(*row) for row in conn.execute(stmt)]

        return sorted(await self._transact(take), key=lambda p: (p.provider, p.chat_id))

    async def drop_approval_post(self, approval_id: str, provider: str, chat_id: str) -> None:
        """Forget one chat's post (its reply was answered there already)."""
        stmt = delete(ApprovalPostRow).where(
            ApprovalPostRow.approval_id == approval_id,
            ApprovalPostRow.provider == provider,
            ApprovalPostRow.chat_id == chat_id,
        )
        await self._transact(lambda conn: conn.execute(stmt))
