"""Word for the human about the deployment itself, no agent's (a number locked out of the phone
menu after wrong PINs): sent to each of the human's chats, the chats mapped to agents (where
their requests reach them too), and kept in the terminal inbox (`agentcomms inbox`, the
console), where it stays whatever a chat provider does. A notice comes from the gateway, never
from an agent, so it goes straight to each provider rather than through an agent's outbox."""

from __future__ import annotations

import asyncio
import logging

from agentcomms.config import Config
from agentcomms.ids import new_event_id
from agentcomms.models import LOCAL_CHANNEL, Event, utcnow
from agentcomms.store import Store
from agentcomms.transports import abilities, load, send_pieces

log = logging.getLogger(__name__)

# A notice is told while a phone's webhook waits for its answer (Twilio waits 15 s): the chats
# get this long, then the notice is left to the inbox.
TELL_WITHIN_S = 5.0
# Whose inbox line a notice is: the operator's own rows (refused callers, strangers) are too.
NOTICE_AGENT = "default"


class HumanNotices:
    def __init__(self, cfg: Config, store: Store) -> None:
        self._cfg = cfg
        self._store = store

    def chats(self, agent_id: str | None = None) -> list[tuple[str, str]]:
        """The human's chats: each (provider, chat) mapped to an agent (to `agent_id`, when
        given), of a provider enabled."""
        found = []
        for channel_id, mapped in sorted(self._cfg.chat.channels.items()):
            provider, _, chat = channel_id.partition(":")
            if agent_id is not None and mapped != agent_id:
                continue
            if abilities(provider).elsewhere and self._cfg.chat.provider(provider).enabled:
                found.append((provider, chat))
        return found

    async def tell(self, text: str, *, kind: str, agent_id: str | None = None) -> list[str]:
        """Tell the human `text` (a notice of `kind`, kept in its inbox line's payload): where it
        reached them. About one agent (`agent_id`): in that agent's inbox line and its chats.
        A chat that refuses it is logged and left; the inbox keeps it."""
        now = utcnow()
        await self._store.record_event(
            Event(
                id=new_event_id(),
                agent_id=agent_id or NOTICE_AGENT,
                channel_id=LOCAL_CHANNEL,
                type="agent_message",
                role="system",
                direction="out",
                payload={"text": text, "provider": "cli", "notice": kind},
                status="delivered",
                attempts=1,
                created_at=now,
                delivered_at=now,
            )
        )
        told = [LOCAL_CHANNEL]
        try:
            async with asyncio.timeout(TELL_WITHIN_S):
                for provider, chat in self.chats(agent_id):
                    if await self._send(provider, chat, text):
                        told.append(f"{provider}:{chat}")
        except TimeoutError:
            log.warning(
                "notice %s: the chats took over %s s; the inbox has it", kind, TELL_WITHIN_S
            )
        return told

    async def _send(self, provider: str, chat: str, text: str) -> bool:
        sender = load(provider).sender(self._cfg)
        try:
            await send_pieces(sender, chat, text)
        except Exception as exc:  # one chat's refusal keeps the notice from no other
            log.warning("notice not sent to %s:%s: %s", provider, chat, exc)
            return False
        finally:
            await sender.close()
        return True
