"""The mailbox's inputs, its state carried through continue-as-new, and what it answers.

Pass-through models (pydantic and the standard library only): the workflow, its client and the
tests import them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from agentcomms.agents.state import Readiness
from agentcomms.models import Agent, AgentStatus, Event, EventType, Registration, Try

Outcome = Literal["delivered", "failed", "rejected"]


class Waiting(BaseModel):
    """A message in the queue as the state carries it: its text is elsewhere (memory, projection)."""

    id: str
    type: EventType
    # The whole event, when the run that continued-as-new handed the text over in its state
    # (a few short messages) rather than through the projection.
    event: Event | None = None

    def lost(self, agent_id: str, at: datetime) -> Event:
        """What stands for this message once its text is lost: enough to settle it as failed."""
        return Event(
            id=self.id,
            agent_id=agent_id,
            channel_id="",
            type=self.type,
            role="system",
            created_at=at,
        )


class HeldReceipt(BaseModel):
    """A chat message typed for an agent whose hooks report: its ✍ waits for the agent's prompt."""

    event: Event  # its payload names the chat and the message to answer; its text is not sent
    note: str | None = None


class AgentState(BaseModel):
    """Everything the mailbox must not forget, carried through continue-as-new."""

    agent_id: str
    # Where this run's tasks go. Kept in state rather than read from workflow.info(): a
    # Replayer runs histories on a made-up queue, and this must replay exactly.
    task_queue: str | None = None
    registration: Registration | None = None
    # When the newest registration or unregister obeyed was made: an older one is a replay.
    pane_changed_at: datetime | None = None
    status: AgentStatus = "offline"
    waiting: list[Waiting] = Field(default_factory=list)
    seen_ids: list[str] = Field(default_factory=list)
    outcomes: dict[str, Outcome] = Field(default_factory=dict)  # event id -> what became of it
    notes: dict[str, str] = Field(default_factory=dict)  # event id -> what typing it changed
    tries: dict[str, list[Try]] = Field(default_factory=dict)  # waiting event id -> failed tries
    last_delivered_event_id: str | None = None
    last_error: str | None = None
    unreachable_since: datetime | None = None
    delivered_count: int = 0
    # Settled events the projection could not take yet (it was down): written by the next run.
    unrecorded: list[Event] = Field(default_factory=list)
    # What the agent is doing, from its hooks and the pane's last look.
    readiness: Readiness = Field(default_factory=Readiness)
    # Chat receipts held until the agent's UserPromptSubmit carries their message (event id ->).
    receipts: dict[str, HeldReceipt] = Field(default_factory=dict)
    # Hook reports ignored because the deployment did not sign them, and the last of them.
    refused_reports: int = 0
    last_refused_report: str | None = None


class AgentInput(BaseModel):
    agent_id: str
    task_queue: str | None = None  # the queue the starter chose: this host's
    state: AgentState | None = None  # set when continuing-as-new


class WaitForDelivery(BaseModel):
    event_id: str
    timeout_s: float = Field(default=10, gt=0, le=300)
    # Wait, too, for the agent's UserPromptSubmit to carry the text (where its hooks report).
    submitted: bool = False


class DeliveryStatus(BaseModel):
    event_id: str
    status: Literal["delivered", "failed", "rejected", "queued", "unknown", "moved"]
    error: str | None = None
    note: str | None = None  # e.g. that the agent's max_chars cut the text
    # The agent's UserPromptSubmit carried the text; None when that cannot be known (no hooks).
    submitted: bool | None = None


class AgentSnapshot(BaseModel):
    """What the `state` query answers: enough to tell a human why a message has not arrived."""

    agent_id: str
    status: AgentStatus
    registration: Registration | None
    pending: int
    last_delivered_event_id: str | None
    last_error: str | None
    unreachable_since: datetime | None
    delivered_count: int
    # Settled events the projection has not taken yet (it is down or locked): typing goes on.
    unrecorded: int = 0
    readiness: Readiness = Field(default_factory=Readiness)
    # Hook reports ignored as not signed by this deployment (someone else signalled them).
    refused_reports: int = 0
    last_refused_report: str | None = None


class QueuedEvent(BaseModel):
    """What the `queued` query answers about one waiting message (`agentcomms trace`)."""

    position: int  # 1: the next one typed
    waiting: int  # how many wait in all
    attempts: int  # failed tries to type it in this run (a missing pane)
    tries: list[Try] = Field(default_factory=list)  # the latest of them, with their errors


class MailboxAccount(BaseModel):
    """What the `account` query answers: what the projection shows of this mailbox now, so that
    a projection lost (its database deleted) is rebuilt from Temporal (`agentcomms db rebuild`).
    The texts are not here: they are in the histories of the runs that received them."""

    agent: Agent  # the agents row, as the mailbox writes it
    waiting: list[str] = Field(default_factory=list)  # the ids that wait, in the order typed
    # What became of the latest messages settled (OUTCOMES_KEPT), and what typing changed.
    outcomes: dict[str, Outcome] = Field(default_factory=dict)
    notes: dict[str, str] = Field(default_factory=dict)
    # Settled events the projection has not taken yet, as they are to be written.
    unrecorded: list[Event] = Field(default_factory=list)
