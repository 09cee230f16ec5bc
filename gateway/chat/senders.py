"""The socket methods of the chat allowlist: admitting a sender by the pairing code they were
given, listing who may write, revoking a paired sender."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentcomms.config import Config
from agentcomms.errors import RpcError
from agentcomms.models import utcnow
from agentcomms.store import Store
from agentcomms.store.records import ChatSender
from gateway.chat.inbox import normalise_code
from gateway.socket.declare import Human, declare
from gateway.socket.params import NoParams, PairParams, RevokeSenderParams
from gateway.socket.protocol import INVALID_PARAMS, NOT_FOUND


class SenderMethods:
    def __init__(
        self,
        cfg: Config,
        store: Store,
        *,
        admitted: Callable[[ChatSender], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self._cfg = cfg
        self._store = store
        # What admitting does on the sender's chat (gateway.chat.admission): told, held messages on.
        self._admitted = admitted

    @declare(Human(decides=True))
    async def pair(self, p: PairParams) -> dict[str, Any]:
        """Who the code would admit; with ``confirm``, admit them.

        Two steps, so that admitting is always something the human saw first: the CLI shows
        the first answer and asks on the terminal before it confirms.
        """
        code, now = normalise_code(p.code), utcnow()
        sender = await (
            self._store.admit_by_code(code, now)
            if p.confirm
            else self._store.pending_by_code(code, now)
        )
        if sender is None:
            raise RpcError(
                NOT_FOUND,
                f"no pairing code {p.code!r} is waiting (codes expire after a day; the sender "
                "gets a new one by writing again)",
            )
        channel = f"{sender.provider}:{sender.chat_id}"
        # A code is admitted once (it is gone after), so this runs once per admission.
        released = await self._admitted(sender) if p.confirm and self._admitted else {}
        return {
            "provider": sender.provider,
            "sender_id": sender.sender_id,
            "sender_name": sender.sender_name,
            "chat_id": sender.chat_id,
            "channel_id": channel,
            "agent_id": self._cfg.chat.channels.get(channel),
            "wrote_at": sender.created_at.isoformat() if sender.created_at else None,
            "admitted": p.confirm,
            **released,
        }

    @declare(Human(decides=True))
    async def senders(self, _: NoParams) -> dict[str, Any]:
        """Who may write, who was revoked, and who waits: never a pending code, which is the
        proof a sender talked to the human and would let whoever reads it admit them."""
        rows: list[dict[str, Any]] = [
            {"provider": provider, "sender_id": sender_id, "source": "config", "state": "allowed"}
            for provider, ids in sorted(self._cfg.chat.allowed_senders.items())
            for sender_id in ids
        ]
        for s in await self._store.list_senders():
            state = "pending" if s.code else ("revoked" if s.revoked_at else "allowed")
            row = s.model_dump(mode="json", exclude_none=True, exclude={"code"})
            rows.append(row | {"source": "paired", "state": state})
        return {"senders": rows, "pending": sum(r["state"] == "pending" for r in rows)}

    @declare(Human(decides=True))
    async def revoke_sender(self, p: RevokeSenderParams) -> dict[str, Any]:
        """Stop a chat sender from writing to any agent (their messages are then refused)."""
        if p.sender_id in self._cfg.chat.allowed_senders.get(p.provider, []):
            raise RpcError(
                INVALID_PARAMS,
                f"{p.provider}:{p.sender_id} is allowed by chat.allowed_senders in the config; "
                "remove it there and restart",
            )
        if not await self._store.revoke_sender(p.provider, p.sender_id, utcnow()):
            raise RpcError(NOT_FOUND, f"{p.provider}:{p.sender_id} is not an admitted sender")
        return {"provider": p.provider, "sender_id": p.sender_id, "revoked": True}
