"""An approval in the agent's chats: the request posted to each chat mapped to the agent, and,
once decided, each chat told how (:mod:`gateway.approval_surfaces.words` holds the words).

- Telegram and Discord: the request with buttons (Allow, Allow for this session where offered,
  Deny); once decided, the message is edited to say who answered, how and where, its buttons
  gone.
- SMS and WhatsApp: the request with a code to reply with ("Reply YES K7QF or NO K7QF"); once
  decided, each of these chats gets one line saying how, except the one whose reply decided it
  (that reply was answered already).

Which messages were posted for which approval is kept in this gateway's memory: after a restart
an answer to an old request is still answered by the approval itself (it knows who decided),
only the edits are lost.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol, cast

from agentcomms.approval_models import ApprovalRequest, ApprovalView
from agentcomms.config import Config
from agentcomms.transports import Sender, TextSender, load
from gateway.approval_surfaces.words import asks, buttons, outcome, reply_with, settled

log = logging.getLogger(__name__)

BUTTON_PROVIDERS = ("telegram", "discord")
CODE_PROVIDERS = ("sms", "whatsapp")
# Of the tool's input, what a text message shows (the whole request stays one message).
TEXT_INPUT_CHARS = 600


class ButtonSender(TextSender, Protocol):
    """A provider whose messages carry buttons and can be edited."""

    async def send_buttons(
        self, chat_id: str, text: str, buttons: list[tuple[str, str]]
    ) -> str: ...

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None: ...


class ApprovalChats:
    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg
        # approval id -> (provider, chat, message id) of each request posted
        self._posted: dict[str, list[tuple[str, str, str]]] = {}
        self._senders: dict[str, Sender] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def announce(self, request: ApprovalRequest) -> None:
        """Post the request to the agent's chats, beside the hook's wait (never holding it)."""
        self._spawn(self._announce(request))

    def settle(self, view: ApprovalView) -> None:
        """Tell each chat that was shown the request how it was decided; once."""
        posted = self._posted.pop(view.request.id, [])
        if posted:
            self._spawn(self._settle(view, posted))

    def answered_in(self, approval_id: str, provider: str, chat_id: str) -> None:
        """A chat of plain text answered: its reply is answered there, so `settle` skips it."""
        if provider in CODE_PROVIDERS and approval_id in self._posted:
            self._posted[approval_id] = [
                p for p in self._posted[approval_id] if (p[0], p[1]) != (provider, chat_id)
            ]

    async def drain(self) -> None:
        """Wait for the posts and edits under way (a test, or the gateway closing)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        await self.drain()
        senders, self._senders = self._senders, {}
        for sender in senders.values():
            try:
                await sender.close()
            except Exception as exc:
                log.warning("approvals: a chat sender did not close: %s", exc)

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _sender(self, provider: str) -> Sender:
        # One per provider for the gateway's life: Discord's logs in once.
        if provider not in self._senders:
            self._senders[provider] = load(provider).sender(self._cfg)
        return self._senders[provider]

    def _chats(self, agent_id: str) -> list[tuple[str, str]]:
        chats = []
        for channel_id, agent in self._cfg.chat.channels.items():
            provider, _, chat = channel_id.partition(":")
            if agent != agent_id or provider not in (*BUTTON_PROVIDERS, *CODE_PROVIDERS):
                continue
            if self._cfg.chat.provider(provider).enabled:
                chats.append((provider, chat))
        return chats

    async def _announce(self, request: ApprovalRequest) -> None:
        for provider, chat in self._chats(request.agent_id):
            try:
                message_id = await self._post(provider, chat, request)
            except Exception as exc:
                log.warning("approval %s: not posted to %s:%s: %s", request.id, provider, chat, exc)
                continue
            self._posted.setdefault(request.id, []).append((provider, chat, message_id))

    async def _post(self, provider: str, chat: str, request: ApprovalRequest) -> str:
        sender = self._sender(provider)
        if provider in BUTTON_PROVIDERS:
            text = f"{asks(request)}\n\n(approval {request.id})"
            if request.ask == "question":  # several options, or words of one's own, by reply
                text += f"\n{reply_with(request)}"
            return await cast(ButtonSender, sender).send_buttons(chat, text, buttons(request))
        text = f"{asks(request, input_chars=TEXT_INPUT_CHARS)}\n\n{reply_with(request)}"
        return await sender.send_text(chat, text)

    async def _settle(self, view: ApprovalView, posted: list[tuple[str, str, str]]) -> None:
        r = view.request
        for provider, chat, message_id in posted:
            sender = self._sender(provider)
            try:
                if provider in BUTTON_PROVIDERS:
                    await cast(ButtonSender, sender).edit_text(chat, message_id, settled(view))
                else:
                    await sender.send_text(chat, outcome(view))
            except Exception as exc:
                log.warning("approval %s: %s:%s not told: %s", r.id, provider, chat, exc)
