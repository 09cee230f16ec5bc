"""The agent's reply comes back: the last words of a turn that a chat message started are sent
to that chat, as an answer to the human's message.

The agent's hooks say when a turn starts (``UserPromptSubmit``, Gemini CLI's ``BeforeAgent``,
with the prompt as typed) and ends (``Stop``, with Claude Code's and Codex's
``last_assistant_message``; Gemini CLI's ``AfterAgent`` with its ``prompt_response``;
``StopFailure``, with its error, which the human is told in one line). The prompt begins
with the header agentcomms typed for the first message in it (``[telegram:456 from Alice] …``;
a body's own lines all begin with ``| ``, so no line of the human's words reads as a header), so
the chat that started the turn is known; only a chat whose message reached this agent through
agentcomms is answered, and the answer refers to the newest such message. Each turn is answered
once (a second ``Stop`` finds it taken), and not at all when the agent sent that chat something
itself (``send_message``) during the turn. A turn a chat did not start is mirrored only with the
agent's ``mirror: "all"``, to each chat mapped to it; ``mirror: "off"`` mirrors nothing.

What is remembered lives in this gateway's memory: a turn that started before a restart ends
without a mirrored reply.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime

from temporalio.service import RPCError

from agentcomms.agents.state import PROMPT_SUBMITTED
from agentcomms.config import Config
from agentcomms.ids import new_event_id
from agentcomms.models import Event, utcnow
from agentcomms.outbox_models import ChatSend, OutboxItem
from agentcomms.store import Store
from agentcomms.transports import CHAT_PROVIDERS, abilities, first_part
from workflows.outbox.client import Outbox

log = logging.getLogger(__name__)

_CHATS = "|".join(CHAT_PROVIDERS)
_HEADER = re.compile(rf"^\[((?:{_CHATS}):[^\s\]]+) from ", re.MULTILINE)
# The longest reply sent back; the outbox splits it at the provider's limit.
MIRRORED_CHARS = 16_000
# What one SMS carries of a long reply (Twilio's 1,600 characters is ten billed segments), and
# where the rest is.
SMS_FIRST_PART = 600
SMS_THE_REST = " […] (the whole reply: `agentcomms inbox`, or the console)"
# A turn's error is told in one line, at most this long.
ERROR_LINE_CHARS = 300
# The hooks that end a turn with its reply, and the payload's field that holds it.
TURN_REPLIES = {
    "Stop": "last_assistant_message",
    "AfterAgent": "prompt_response",
    "TurnEnd": "reply",  # a process agent's, told by its host (agentcomms.acp.asking)
}
# How far back a chat's history is read for the human's message and the agent's own sends.
LOOK_BACK = 20


@dataclass(frozen=True)
class Turn:
    channel_id: str | None  # the chat whose message started it; None: the terminal, a peer…
    started_at: datetime


def chat_of(prompt: object) -> str | None:
    """The chat whose message begins a prompt agentcomms typed; None for any other prompt."""
    if not isinstance(prompt, str):
        return None
    found = _HEADER.match(prompt)
    return found[1] if found else None


def last_words(event: str, payload: dict[str, object]) -> str | None:
    """What the human is sent at a turn's end: the agent's reply, or, for a turn that ended in an
    error (Claude Code's ``StopFailure``: a rate limit, a failed login), one line saying so."""
    if event in TURN_REPLIES:
        reply = payload.get(TURN_REPLIES[event])
        return reply[:MIRRORED_CHARS] if isinstance(reply, str) and reply.strip() else None
    error, details = payload.get("error"), payload.get("error_details")
    line = f"The agent's turn stopped on an error: {error if isinstance(error, str) else 'unknown'}"
    if isinstance(details, str) and details.strip():
        line += f" ({details})"
    return " ".join(line.split())[:ERROR_LINE_CHARS]


class ReplyMirror:
    def __init__(self, cfg: Config, store: Store, outbox: Outbox) -> None:
        self._cfg = cfg
        self._store = store
        self._outbox = outbox
        self._turns: dict[str, Turn] = {}  # agent -> the turn a chat started, until it ends

    async def agent_did(self, agent_id: str, event: str, payload: dict[str, object]) -> None:
        """An observer of the agent's hooks (:class:`gateway.agents.hooks.AgentHookMethods`)."""
        if event in PROMPT_SUBMITTED:
            self._turns[agent_id] = Turn(chat_of(payload.get("prompt")), utcnow())
        elif event in (*TURN_REPLIES, "StopFailure"):
            turn = self._turns.pop(agent_id, None)  # taken: a second Stop sends nothing
            reply = last_words(event, payload)
            if turn is None or reply is None:
                return
            mode = self._cfg.mirror(agent_id)
            if turn.channel_id is not None and mode != "off":
                chats = [turn.channel_id]
            elif mode == "all":
                chats = [c for c, a in self._cfg.chat.channels.items() if a == agent_id]
            else:
                return
            for channel_id in chats:
                try:
                    await self._mirror(agent_id, channel_id, turn, reply)
                except (RPCError, OSError) as exc:  # the turn is over either way
                    log.warning("%s: reply not mirrored to %s: %s", agent_id, channel_id, exc)
        elif event == "SessionEnd":
            self._turns.pop(agent_id, None)

    async def _mirror(self, agent_id: str, channel_id: str, turn: Turn, reply: str) -> None:
        provider, _, chat_id = channel_id.partition(":")
        if not abilities(provider).elsewhere or not self._cfg.chat.provider(provider).enabled:
            return
        history = await self._store.channel_history(channel_id, LOOK_BACK, agent_id=agent_id)
        if any(e.direction == "out" and e.created_at >= turn.started_at for e in history):
            return  # the agent wrote to the chat itself during the turn
        reply_to: str | None = None
        if channel_id == turn.channel_id:
            asked = [e for e in history if e.direction == "in" and e.type == "human_message"]
            if not asked:
                return  # no message of this chat reached the agent through agentcomms
            reply_to = str(asked[-1].payload.get("message_id") or "") or None
        event = Event(
            id=new_event_id(),
            agent_id=agent_id,
            channel_id=channel_id,
            type="agent_message",
            role="agent",
            direction="out",
            source_agent_id=agent_id,
            payload={
                "text": reply,
                "provider": provider,
                "chat_id": chat_id,
                "reply_to": reply_to,
                "mirrored": True,
            },
        )
        sent = reply
        if abilities(provider).billed:
            # Each SMS is billed and a phone may show the parts out of order: the start, and
            # where the whole reply is (kept in the projection, shown by `inbox` and the console).
            sent = first_part(reply, SMS_FIRST_PART, SMS_THE_REST)
        send = ChatSend(provider=provider, chat_id=chat_id, text=sent, reply_to=reply_to)
        await self._outbox.post(
            agent_id, channel_id, OutboxItem(id=event.id, send=send, event=event)
        )
        await self._store.record_event(event)
        log.info("%s: turn's reply mirrored to %s", agent_id, channel_id)
