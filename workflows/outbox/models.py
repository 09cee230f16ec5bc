"""What an outbox is started with, carries through continue-as-new and answers. What it sends
(``ChatSend``, ``OutboxItem``) is ``agentcomms.outbox_models``: the chat activities and the
gateway use those too."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcomms.outbox_models import OutboxItem


class SendOutcome(BaseModel):
    status: Literal["sent", "failed"]
    message_id: str | None = None
    error: str | None = None
    attempt: int | None = None  # the try that got through


class OutboxState(BaseModel):
    agent_id: str
    channel_id: str
    pending: list[OutboxItem] = Field(default_factory=list)
    # Carried across continue-as-new: a gateway that re-posts an item must not send it twice.
    seen_ids: list[str] = Field(default_factory=list)
    outcomes: dict[str, SendOutcome] = Field(default_factory=dict)
    sent_count: int = 0


class OutboxInput(BaseModel):
    agent_id: str
    channel_id: str
    state: OutboxState | None = None


class WaitSent(BaseModel):
    item_id: str
    timeout_s: float = Field(default=10, gt=0, le=300)


class SendStatus(BaseModel):
    item_id: str
    status: Literal["sent", "failed", "queued", "unknown", "moved"]
    message_id: str | None = None
    error: str | None = None
