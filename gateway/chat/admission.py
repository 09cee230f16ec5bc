"""What admitting a chat sender does on their chat: they are told, and what they wrote while
their pairing code waited reaches the agent then, once, in the order they wrote it.

A stranger's messages were recorded, refused and never shown to an agent, within the bounds of
:mod:`gateway.chat.strangers` (each cut to ``STRANGER_TEXT_MAX``). Those written since their code was
offered are the held ones: each is posted to the mailbox as if it arrived now, routed as it
would have been (the chat's agent, or ``@agent``), under an id derived from the recorded one, so
a release tried again is the same message and is typed once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from temporalio.service import RPCError

from agentcomms.config import Config
from agentcomms.errors import MailboxFull
from agentcomms.ids import new_event_id, provider_event_id
from agentcomms.models import Event
from agentcomms.outbox_models import ChatSend, OutboxItem
from agentcomms.store import Store
from agentcomms.store.records import ChatSender
from agentcomms.transports import InboundMessage
from gateway.chat.inbox import ChatInbox
from gateway.chat.strangers import STRANGER_TEXT_MAX
from workflows.mailbox.client import Mailbox
from workflows.outbox.client import Outbox

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Released:
    """What admitting did on the sender's chat."""

    told: bool  # the "you are admitted" message is queued to their chat
    passed_on: int  # held messages posted to an agent's mailbox
    held: int  # held messages in all

    def as_json(self) -> dict[str, Any]:
        return {"told": self.told, "passed_on": self.passed_on, "held": self.held}


class Admission:
    def __init__(
        self, cfg: Config, store: Store, mailbox: Mailbox, outbox: Outbox, inbox: ChatInbox
    ) -> None:
        self._cfg = cfg
        self._store = store
        self._mailbox = mailbox
        self._outbox = outbox
        self._inbox = inbox

    async def admitted(self, sender: ChatSender) -> dict[str, Any]:
        """Pass on what ``sender`` wrote while they waited, then tell them on their chat."""
        if sender.chat_id is None or sender.created_at is None:
            return Released(False, 0, 0).as_json()
        held = await self._store.held_messages(sender, sender.created_at)
        channel_id = f"{sender.provider}:{sender.chat_id}"
        agent_id = self._cfg.chat.channels.get(channel_id)
        passed_on, cut = 0, False
        for event in held if agent_id is not None else []:
            if not _text(event).strip():
                continue  # a photo or a voice note: nothing of it was kept to pass on
            if not await self._pass_on(event):
                break  # later ones never overtake one that could not go
            passed_on += 1
            cut = cut or _was_cut(event)
        if passed_on < len(held):
            log.warning(
                "%s:%s admitted: %d of the %d messages they wrote while waiting were not passed on",
                sender.provider,
                sender.sender_id,
                len(held) - passed_on,
                len(held),
            )
        text = admitted_text(agent_id, passed_on, len(held), cut=cut)
        told = await self._tell(sender, channel_id, agent_id, text)
        return Released(told, passed_on, len(held)).as_json()

    async def _pass_on(self, held: Event) -> bool:
        message = _inbound(held)
        agent_id, text = await self._inbox.route(message)
        if agent_id is None:
            return False
        event = Event(
            id=provider_event_id("held", held.channel_id, held.id),
            agent_id=agent_id,
            channel_id=held.channel_id,
            type="human_message",
            role="human",
            payload={**held.payload, "text": text, "held": held.id},
        )
        try:
            await self._mailbox.post(event)
        except (MailboxFull, RPCError) as exc:
            log.warning("held message %s not passed on to %s: %s", held.id, agent_id, exc)
            return False
        await self._inbox.queued_receipt(agent_id, message, event.id)
        return True

    async def _tell(
        self, sender: ChatSender, channel_id: str, agent_id: str | None, text: str
    ) -> bool:
        assert sender.chat_id is not None
        event = Event(
            id=new_event_id(),
            agent_id=agent_id or "default",
            channel_id=channel_id,
            type="system",
            role="system",
            direction="out",
            payload={"text": text, "provider": sender.provider, "chat_id": sender.chat_id},
        )
        send = ChatSend(provider=sender.provider, chat_id=sender.chat_id, text=text)
        try:
            await self._outbox.post(
                event.agent_id, channel_id, OutboxItem(id=event.id, send=send, event=event)
            )
        except RPCError as exc:
            log.warning("%s admitted, but not told: %s", channel_id, exc)
            return False
        await self._store.record_event(event)
        return True


def admitted_text(agent_id: str | None, passed_on: int, held: int, *, cut: bool = False) -> str:
    """What an admitted sender reads on their chat: where their messages go now, and what
    became of those they sent while they waited."""
    if agent_id is None:
        return (
            "You are admitted, but this chat is not connected to an agent yet: the operator "
            "maps it in chat.channels (or write @AGENT from a chat that is)."
        )
    said = f"You are admitted: your messages here now reach {agent_id}."
    if passed_on:
        sent = "message" if passed_on == 1 else f"{passed_on} messages"
        said += f" The {sent} you sent while you waited reached it now."
    if cut:
        said += (
            f" (What was longer than {STRANGER_TEXT_MAX} characters was cut: send the rest again.)"
        )
    if held > passed_on:
        said += (
            f" {held - passed_on} sent while you waited did not (photos and voice notes are "
            "not kept, and a full mailbox takes none): send them again."
        )
    return said


def _was_cut(event: Event) -> bool:
    # A stranger's recorded text is kept short (gateway.chat.strangers.cut).
    text = _text(event)
    return len(text) >= STRANGER_TEXT_MAX and text.endswith("…")


def _text(event: Event) -> str:
    return str(event.payload.get("text") or "")


def _inbound(held: Event) -> InboundMessage:
    """The recorded message as it came in, to be routed as it would have been."""
    p = held.payload
    return InboundMessage(
        provider=str(p.get("provider")),
        chat_id=str(p.get("chat_id")),
        message_id=str(p.get("message_id")),
        sender_id=str(p.get("sender_id")),
        sender_name=str(p.get("sender_name") or ""),
        text=str(p.get("text") or ""),
        chat_type=p.get("chat_type"),
    )
