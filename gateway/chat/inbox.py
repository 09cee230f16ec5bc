"""Chat in the gateway: what happens to a human's message between a provider and a mailbox.

Inbound, in order: the same message seen before is a duplicate (its event id is derived from the
provider's message id); a sender who is neither in ``chat.allowed_senders`` nor admitted by
pairing is rejected (recorded, answered once with a pairing code, never shown to an agent,
within the bounds of ``gateway.chat.strangers``), whatever the message holds; a message of nothing an agent can read (a photo) is answered saying
so; an allowed sender's command (``/new``, ``/peek``…) is run and answered in the chat
(:mod:`gateway.chat.commands`); the channel (``telegram:456``) or an ``@agent`` prefix picks
the agent; the message is posted to the agent's mailbox, durable when ``post`` returns; the "queued" receipt goes out through the
outbox (the mailbox asks for the "typed" one when it types the message). A voice
note is transcribed after the allowlist and routing (a stranger's audio is never fetched) and
before the post, and reaches the agent as text marked ``transcribed``. A photo or document is
saved in the agent's folder at the same point (:mod:`gateway.chat.attachments`), and the agent
reads its path before the caption.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio.service import RPCError

from agentcomms import metrics, transports
from agentcomms.config import Config
from agentcomms.errors import AttachmentRefused, MailboxFull, NoTransport, NotTranscribed
from agentcomms.ids import AGENT_ID_PATTERN, new_event_id, provider_event_id
from agentcomms.models import Event, utcnow
from agentcomms.outbox_models import receipt_item
from agentcomms.store import Store
from agentcomms.store.records import ChatSender
from agentcomms.store.senders import not_allowed
from agentcomms.transports import (
    ButtonPress,
    InboundMessage,
    InboundResult,
    LinkStatus,
    Receiver,
)
from gateway.approvals.words import coded, refused_answer, ticking
from gateway.chat.attachments import Attachments, whereabouts
from gateway.chat.commands import ChatCommands, parse
from gateway.chat.strangers import GROUP_CHAT_TYPES, StrangerLimits, cut
from gateway.chat.voice_notes import VoiceNotes
from workflows.mailbox.client import Mailbox
from workflows.outbox.client import Outbox

log = logging.getLogger(__name__)

PAIRING_TTL = timedelta(hours=24)
# No 0/O, 1/I/L: a code read aloud or off a phone is typed right the first time.
_CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
_CODE_LENGTH = 6
_MENTION = re.compile(r"@(" + AGENT_ID_PATTERN.strip("^$") + r")(?:\s+|$)")
# What a voice note that was not heard shows where its words would be.
NOT_TRANSCRIBED_TEXT = "[voice note, not transcribed]"
_REASON_MAX = 400


def new_pairing_code() -> str:
    return "".join(secrets.choice(_CODE_ALPHABET) for _ in range(_CODE_LENGTH))


def normalise_code(code: str) -> str:
    return code.strip().upper().replace("-", "").replace(" ", "")


def _payload(message: InboundMessage, text: str) -> dict[str, Any]:
    """An inbound chat message's event payload: the words, and who sent them from where."""
    payload: dict[str, Any] = {
        "text": text,
        "sender_id": message.sender_id,
        "sender_name": message.sender_name,
        "message_id": message.message_id,
        "provider": message.provider,
        "chat_id": message.chat_id,
        "chat_type": message.chat_type,
    }
    if message.voice is not None:
        payload["voice_note"] = True
    if message.attachment is not None:  # a stranger's shows what it was, never fetched
        payload["attachment"] = {"kind": message.attachment.kind, "name": message.attachment.name}
    return payload


class ChatInbox:
    """The gateway's :class:`~agentcomms.transports.InboundSink`: allowlist, route, post, receipt."""

    def __init__(
        self,
        cfg: Config,
        store: Store,
        mailbox: Mailbox,
        outbox: Outbox,
        *,
        on_button: Callable[[ButtonPress], Awaitable[str]] | None = None,
        on_reply: Callable[[InboundMessage, str], Awaitable[InboundResult | None]] | None = None,
        host: str,
        commands: ChatCommands | None = None,
    ) -> None:
        self._cfg = cfg
        self._store = store
        # Where a mail receiver keeps how far it read its mailbox (the projection).
        self.mail_cursors = store
        self._mailbox = mailbox
        self._outbox = outbox
        self._voice_notes = VoiceNotes(cfg)
        self._attachments = Attachments(host, cfg.chat.max_file_bytes)
        self._strangers = StrangerLimits(store)
        # Who takes a button press from an allowed sender (the approvals' chat answers).
        self._on_button = on_button
        # Who takes an allowed sender's message carrying an approval's code ("YES K7QF") as
        # its answer (never typed into a pane); None from it: an ordinary message.
        self._on_reply = on_reply
        # Who runs an allowed sender's `/new`, `/agents`, `/stop`, `/esc`, `/peek`; None:
        # they are messages like any other.
        self.commands = commands

    async def accept(self, message: InboundMessage) -> InboundResult:
        event_id = provider_event_id(message.provider, message.chat_id, message.message_id)
        # The projection row is written only after Temporal accepted the message (or it was
        # rejected): a row means this message was handled, and a re-sent one needs nothing.
        seen = await self._store.get_event(event_id)
        if seen is not None:
            return InboundResult("duplicate", event_id=event_id, agent_id=seen.agent_id)
        agent_id, text = await self.route(message)
        if not await self._allowed(message):
            return await self._reject(message, event_id, agent_id)
        if self.commands is not None and message.voice is None and message.attachment is None:
            command = parse(message.text)
            if command is not None:  # the human's own, answered here: never typed
                reply = await self.commands.run(command, message, event_id)
                return InboundResult("answered", event_id=event_id, reply=reply)
        if self._on_reply is not None and message.voice is None and message.attachment is None:
            answered = await self._on_reply(message, event_id)
            if answered is not None:
                return answered
        if message.unreadable is not None:
            # Nothing is queued. Only now is the sender told why: an answer is a message the
            # operator may pay for, and a stranger has had theirs above.
            log.info("%s: %s sent only %s", message.channel_id, event_id, message.unreadable)
            return InboundResult("refused", reply=transports.not_passed_on(message.unreadable))
        if agent_id is None:
            log.info("%s: not mapped to an agent; message %s dropped", message.channel_id, event_id)
            return InboundResult(
                "unrouted",
                reply=(
                    f"This chat ({message.channel_id}) is not connected to an agent. The "
                    f'operator maps it in chat.channels, e.g. "{message.channel_id}": "backend".'
                ),
            )
        heard: dict[str, Any] = {}
        if message.attachment is not None:
            try:
                text, heard = await self._saved(message, event_id, agent_id, text)
            except AttachmentRefused as exc:
                log.info("%s: %s's file not passed on: %s", message.channel_id, event_id, exc)
                kind = message.attachment.kind
                return InboundResult(
                    "refused", agent_id=agent_id, reply=f"Your {kind} was not passed on: {exc}"
                )
        if message.voice is not None:
            try:
                note = await self._voice_notes.transcribe(event_id, message.voice)
            except NotTranscribed as exc:
                return await self._not_heard(message, event_id, agent_id, exc)
            text = "\n".join(part for part in (note.text, text.strip()) if part)  # then a caption
            # The agent learns these are a recognizer's words, not the human's typing.
            heard = {
                "transcribed": True,
                "audio": note.audio,
                "stt_provider": note.provider,
                "duration_s": note.duration_s,
            }
        event = Event(
            id=event_id,
            agent_id=agent_id,
            channel_id=message.channel_id,
            type="human_message",
            role="human",
            # The pane shows who wrote it and where (framing.pane_text).
            payload={**_payload(message, text), "reply_to": message.reply_to, **heard},
        )
        try:
            await self._mailbox.post(event)
        except MailboxFull as exc:
            log.warning(
                "%s refused for %s: %s",
                event_id,
                agent_id,
                exc,
                extra={"event_id": event_id, "agent_id": agent_id},
            )
            return InboundResult(
                "refused",
                event_id=event_id,
                agent_id=agent_id,
                reply=f"{agent_id}'s mailbox is full, so this message was not queued. "
                "Send it again later.",
            )
        await self.queued_receipt(agent_id, message, event_id)
        return InboundResult("queued", event_id=event_id, agent_id=agent_id)

    async def _saved(
        self, message: InboundMessage, event_id: str, agent_id: str, caption: str
    ) -> tuple[str, dict[str, Any]]:
        """Save a photo or document in the agent's folder: the text the agent reads (where it
        is, then the caption) and what the event records of it."""
        assert message.attachment is not None
        where = await whereabouts(self._store, self._mailbox, agent_id)
        saved = await self._attachments.save(event_id, message.attachment, agent_id, where)
        kind = message.attachment.kind
        text = "\n".join(part for part in (f"[{kind}: {saved.path}]", caption.strip()) if part)
        return text, {
            "attachment": {
                "kind": kind,
                "name": message.attachment.name,
                "path": str(saved.path),
                "content_type": saved.content_type,
                "size": saved.size,
            }
        }

    async def route(self, message: InboundMessage) -> tuple[str | None, str]:
        """The agent a message goes to and the text it gets: the agent the provider's own
        threading names (an email's reply or plus-address), then ``@agent``, then the channel."""
        if message.agent_id is not None and await self._is_agent(message.agent_id):
            return message.agent_id, message.text
        mapped = self._cfg.chat.channels.get(message.channel_id)
        if mapped is None:
            return None, message.text  # "@agent" works from mapped channels only
        mention = _MENTION.match(message.text)
        if mention and await self._is_agent(mention[1]):
            return mention[1], message.text[mention.end() :]
        return mapped, message.text

    async def _is_agent(self, agent_id: str) -> bool:
        # "@alice" may be a person in a group chat: only a known agent's name routes.
        return (
            agent_id in self._cfg.agents
            or agent_id in self._cfg.chat.channels.values()
            or await self._store.get_agent(agent_id) is not None
        )

    async def button(self, press: ButtonPress) -> str:
        """A button under one of our messages: only an allowed sender's press counts; a
        stranger's is recorded like their messages (within the same bounds)."""
        if not await self._sender_allowed(press.provider, press.sender_id):
            log.warning(
                "%s:%s, not an allowed sender, pressed a button in %s: ignored",
                press.provider,
                press.sender_id,
                press.channel_id,
            )
            metrics.refused("sender_not_allowed")
            if await self._strangers.take_row(press.provider, press.sender_id):
                await self._store.record_event(
                    Event(
                        id=new_event_id(),
                        agent_id=self._cfg.chat.channels.get(press.channel_id) or "default",
                        channel_id=press.channel_id,
                        type="system",
                        role="human",
                        status="rejected",
                        error=not_allowed(press.provider, press.sender_id),
                        payload={
                            "text": cut(f"pressed a button: {press.data}"),
                            "sender_id": press.sender_id,
                            "sender_name": press.sender_name,
                            "provider": press.provider,
                            "chat_id": press.chat_id,
                        },
                    )
                )
            return "Only the agent's allowed senders may answer this: nothing changed."
        if self._on_button is None:
            return "Nothing here takes an answer now."
        return await self._on_button(press)

    def in_place(self, data: str) -> bool:
        """A box of a question that takes several options: a press ticks or unticks it, shown
        in the message's own buttons; anything else (Done among them) may settle something."""
        tick = ticking(data)
        return tick is not None and tick.option is not None

    async def _allowed(self, message: InboundMessage) -> bool:
        return await self._sender_allowed(message.provider, message.sender_id)

    async def _sender_allowed(self, provider: str, sender_id: str) -> bool:
        listed = self._cfg.chat.allowed_senders.get(provider, [])
        return sender_id in listed or await self._store.sender_admitted(provider, sender_id)

    async def _reject(
        self, message: InboundMessage, event_id: str, agent_id: str | None
    ) -> InboundResult:
        """Record a stranger's message for audit (never for an agent) and offer a pairing code,
        within the bounds of ``gateway.chat.strangers``."""
        if agent_id is None and message.chat_type in GROUP_CHAT_TYPES:
            metrics.refused("sender_not_allowed_unmapped_group")
            return InboundResult("rejected")  # a group that is not the operator's: ignored
        if not await self._strangers.take_row(message.provider, message.sender_id):
            metrics.refused("sender_not_allowed_over_limit")
            return InboundResult("rejected")  # neither written nor answered
        metrics.refused("sender_not_allowed")
        now = utcnow()
        await self._store.record_event(
            Event(
                id=event_id,
                agent_id=agent_id or "default",
                channel_id=message.channel_id,
                type="human_message",
                role="human",
                status="rejected",
                error=not_allowed(message.provider, message.sender_id),
                payload=_payload(message, cut(message.text)),
                created_at=now,
            )
        )
        log.info("rejected %s from %s:%s", event_id, message.provider, message.sender_id)
        if not await self._strangers.take_reply():
            return InboundResult("rejected", event_id=event_id, agent_id=agent_id)
        code, new = await self._store.offer_pairing(
            ChatSender(
                provider=message.provider,
                sender_id=message.sender_id,
                sender_name=message.sender_name,
                chat_id=message.chat_id,
                code=new_pairing_code(),
                expires_at=now + PAIRING_TTL,
            ),
            now,
        )
        if not new:
            await self._strangers.give_back_reply()
        # One answer per stranger while the code is valid: writing again gets silence.
        reply = (
            f"Your messages do not reach anyone yet. Ask the operator to run: agentcomms pair {code}"
            if new
            else None
        )
        answer = coded(message.text)
        if reply is not None and answer is not None:
            reply = f"{refused_answer(answer.approval_id)} {reply}"
        return InboundResult("rejected", event_id=event_id, agent_id=agent_id, reply=reply)

    async def _not_heard(
        self, message: InboundMessage, event_id: str, agent_id: str, exc: NotTranscribed
    ) -> InboundResult:
        """Record a voice note no recognizer could hear (never typed) and tell the human why."""
        metrics.refused("voice_note_not_transcribed")
        reason = str(exc)
        if len(reason) > _REASON_MAX:
            reason = reason[: _REASON_MAX - 1] + "…"
        payload = _payload(message, NOT_TRANSCRIBED_TEXT)
        if exc.audio:
            payload["audio"] = exc.audio
        # "rejected": kept for the operator (events, history), not shown to the agent as words.
        await self._store.record_event(
            Event(
                id=event_id,
                agent_id=agent_id,
                channel_id=message.channel_id,
                type="human_message",
                role="human",
                status="rejected",
                error=f"voice note not transcribed: {reason}",
                payload=payload,
                created_at=utcnow(),
            )
        )
        log.warning("%s: voice note %s not transcribed: %s", message.channel_id, event_id, reason)
        return InboundResult(
            "rejected",
            event_id=event_id,
            agent_id=agent_id,
            reply=f"Could not transcribe your voice note: {reason}. Please send it as text.",
        )

    async def queued_receipt(self, agent_id: str, message: InboundMessage, event_id: str) -> None:
        item = receipt_item(
            event_id,
            provider=message.provider,
            chat_id=message.chat_id,
            message_id=message.message_id,
            stage="queued",
        )
        try:
            await self._outbox.post(agent_id, message.channel_id, item)
        except RPCError as exc:  # the message itself is durable; only the receipt is lost
            log.warning("receipt %s not queued: %s", item.id, exc)


class ChatTransports:
    """The receivers of the enabled providers, and every provider's status."""

    def __init__(self, cfg: Config, sink: transports.InboundSink) -> None:
        self._cfg = cfg
        self._sink = sink
        self.receivers: dict[str, Receiver] = {}
        self._problems: dict[str, str] = {}

    async def start(self) -> None:
        for name in transports.PROVIDERS:
            section = self._cfg.chat.provider(name)
            if not transports.abilities(name).elsewhere or not section.enabled:
                continue
            if missing := section.missing_credentials():
                unset = ", ".join(f"chat.{name}.{key}" for key in missing)
                self._problems[name] = f"{unset} not set"
                continue
            try:
                receiver = transports.load(name).receiver(self._cfg, self._sink)
            except NoTransport as exc:
                self._problems[name] = str(exc)
                continue
            if receiver is not None:
                await receiver.start()
                self.receivers[name] = receiver

    def statuses(self) -> list[dict[str, Any]]:
        """Each provider: connected, connecting, reconnecting (with the last error), failed, disabled."""
        rows: list[dict[str, Any]] = []
        for name in transports.PROVIDERS:
            section = self._cfg.chat.provider(name)
            if not section.enabled:
                status = LinkStatus("disabled")
            elif not transports.abilities(name).elsewhere:  # nothing to connect to
                status = LinkStatus("connected")
            elif name in self._problems:
                status = LinkStatus("failed", self._problems[name])
            elif name in self.receivers:
                status = self.receivers[name].status
            else:
                status = LinkStatus("failed", "enabled after the gateway started: restart it")
            rows.append({"name": name, **status.as_json()})
        return rows

    def routes(self) -> list[Any]:
        return [route for r in self.receivers.values() for route in r.routes()]

    async def close(self) -> None:
        for receiver in self.receivers.values():
            await receiver.close()
