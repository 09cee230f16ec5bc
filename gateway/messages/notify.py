"""One-way push notifications (the ``notify`` section): an agent's turn ended, an agent went
offline, an approval waits; published to the human's ntfy topic through ``chat.ntfy``'s server
and token. They carry nothing back, so each is told beside what it tells of (an agent's hook, an
approval opening), never holding it up: one ntfy refuses is logged and left.

An approval waiting is notified only where the topic is not one of the agent's chats: those
show the request already, with its buttons (:mod:`gateway.approvals.push`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agentcomms.approval_models import ApprovalView
from agentcomms.config import Config
from agentcomms.config.notify import NotifyOn
from agentcomms.transports import channel_id, first_part
from agentcomms.transports.ntfy import HIGH, Notification, NtfySender
from gateway.agents.mirror import TURN_REPLIES, last_words
from gateway.approvals.words import PUSH_REQUEST_CHARS, WHERE_WHOLE, asks, shown_remotely

log = logging.getLogger(__name__)

# What a notification shows of an agent's reply (the whole is in its chat, or the inbox).
REPLY_CHARS = 600
REPLY_REST = " […] (the whole: `agentcomms inbox`, or the console)"


class PushNotify:
    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg
        self._tasks: set[asyncio.Task[None]] = set()

    def topic(self) -> str | None:
        """The topic notified; None when nothing is (`notify` off, or ntfy not set up)."""
        return self._cfg.notify.topic_of(self._cfg.chat.ntfy)

    async def agent_did(self, agent_id: str, event: str, payload: dict[str, Any]) -> None:
        """An observer of the agents' hooks: a turn's end, a session's end."""
        if event in (*TURN_REPLIES, "StopFailure"):
            words = last_words(event, payload) or "(no words)"
            self.tell(
                "turn_ended",
                Notification(
                    title=f"{agent_id} finished its turn",
                    message=first_part(words, REPLY_CHARS, REPLY_REST),
                    tags=("white_check_mark",) if event != "StopFailure" else ("x",),
                ),
            )
        elif event == "SessionEnd":
            reason = payload.get("reason")
            said = f" ({reason})" if isinstance(reason, str) and reason.strip() else ""
            self.tell(
                "agent_offline",
                Notification(
                    title=f"{agent_id} went offline",
                    message=f"{agent_id}'s session ended{said[:100]}: messages to it wait "
                    "until it is back.",
                    tags=("zzz",),
                ),
            )

    def approval(self, view: ApprovalView) -> None:
        """An observer of the approvals: one opened, where the topic does not show it already."""
        request = view.request
        topic = self.topic()
        if view.decision is not None or topic is None:
            return
        if self._cfg.chat.channels.get(channel_id("ntfy", topic)) == request.agent_id:
            return  # its chat rung shows it there, with buttons
        asked = first_part(asks(shown_remotely(request)), PUSH_REQUEST_CHARS, "[…]")
        self.tell(
            "approval_waiting",
            Notification(
                title=f"{request.agent_id} waits for you: approval {request.id}",
                message=f"{asked}\n\nAnswer {request.id} with {WHERE_WHOLE}, or in the "
                "agent's chats.",
                priority=HIGH,
                tags=("warning",),
            ),
        )

    def tell(self, on: NotifyOn, note: Notification) -> None:
        """Publish `note` when `on` is notified, beside the caller."""
        topic = self.topic()
        if topic is None or on not in self._cfg.notify.on:
            return
        task = asyncio.create_task(self._publish(on, topic, note))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self, on: str, topic: str, note: Notification) -> None:
        try:
            await NtfySender(self._cfg).publish(topic, note)
        except Exception as exc:  # one-way: the human hears it elsewhere, or not at all
            log.warning("notify %s: not published to ntfy:%s: %s", on, topic, exc)

    async def drain(self) -> None:
        """Wait for the notifications under way (a test, or the gateway closing)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
