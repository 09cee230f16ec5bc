"""What the outbox workflow, its activities and its clients hand each other.

``ChatSend`` is what one item sends, ``SendItem``/``ChatSent`` the ``send_chat`` activity's input
and result, ``OutboxItem`` one entry of an outbox's queue (posted, signed, by the gateway and by
the mailbox's receipts), ``QueueReceipt`` the ``queue_receipt`` activity's input. They live here, not in ``workflows/outbox/``, so the
activities and the gateway depend on core models rather than on a workflow module.

Workflows import this module, so it holds only pydantic models and the standard library: no I/O.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from agentcomms.models import Event


class FileRef(BaseModel):
    """A file an agent sends, read where it lies when it is sent: its bytes must still be
    those the gateway checked (the digest), so a file changed or swapped since is not sent."""

    path: str  # absolute, inside the agent's folder when the gateway checked it
    name: str  # what the human sees it called
    sha256: str
    size: int


class ChatSend(BaseModel):
    """One call to a provider: a text message, or a receipt for a message the human sent."""

    provider: str
    chat_id: str
    kind: Literal["text", "receipt"] = "text"
    text: str = ""
    reply_to: str | None = None  # text: the provider message id it answers
    message_id: str | None = None  # receipt: the human's message it is for
    stage: Literal["queued", "typed"] | None = None  # receipt: what became of that message
    note: str | None = None  # receipt: what typing changed (the agent's max_chars cut the text)
    files: list[FileRef] = []  # text: files sent after it, each as the provider's attachment
    # text: the outbound event it sends, whose failed tries the activity records (receipts have none)
    event_id: str | None = None


class ChatSent(BaseModel):
    message_id: str | None = None  # the provider's id of what was sent (None for a reaction)
    # Which try got through: Temporal retries the activity where the outbox cannot count.
    attempt: int | None = None


class OutboxItem(BaseModel):
    id: str  # the outbound event's id, or "<event id>:<stage>" for a receipt
    send: ChatSend
    event: Event | None = None  # the outbound message, settled in the projection once sent
    # The deployment's tag, bound to the outbox's agent and chat (:mod:`agentcomms.trust`):
    # anyone can signal an outbox, and nothing else is sent or written.
    signature: str | None = None


class SendItem(BaseModel):
    """The ``send_chat`` activity's input: one item of the outbox of (agent, chat), which the
    activity checks against the deployment's tag and sends as signed."""

    agent_id: str
    channel_id: str
    item: OutboxItem


def receipt_item(
    event_id: str,
    *,
    provider: str,
    chat_id: str,
    message_id: str,
    stage: Literal["queued", "typed"],
    note: str | None = None,
) -> OutboxItem:
    """The receipt for a human's message (``<event id>:<stage>``): whoever asks for it twice,
    the gateway or a replayed mailbox, the outbox sends it once."""
    return OutboxItem(
        id=f"{event_id}:{stage}",
        send=ChatSend(
            provider=provider,
            chat_id=chat_id,
            kind="receipt",
            message_id=message_id,
            stage=stage,
            note=note,
        ),
    )


class QueueReceipt(BaseModel):
    """A mailbox asks the outbox of (agent, channel) to send a receipt."""

    agent_id: str
    channel_id: str
    item: OutboxItem
