"""An agent's messages to one chat as the projection showed them, from what Temporal keeps of
its outbox (``outbox-<agent>-<chat>``): each message the deployment signed, in the order it was
queued, sent (with the provider's message id), failed (with the provider's reason) or waiting;
and which run's send took each item, so that a copy signalled again still sends nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from temporalio.client import Client, WorkflowExecution

from activities.projection import outbox_may_write
from agentcomms.models import Event
from agentcomms.outbox_models import ChatSent, OutboxItem, SendItem
from agentcomms.trust import DeploymentKey
from gateway.rebuild.histories import decode, read_run
from workflows.outbox.models import OutboxInput, SendOutcome


@dataclass
class Spent:
    """A chat send taken by one activity of one run (the `spent` guard of outbox items)."""

    whose: str
    by: str
    at: datetime


@dataclass
class OutboxRows:
    events: list[Event] = field(default_factory=list)
    spent: list[Spent] = field(default_factory=list)


def item_key(agent_id: str, channel_id: str, item_id: str) -> str:
    """How the guard against sending an item twice names it (activities.chat)."""
    return hashlib.sha256(f"{agent_id}\0{channel_id}\0{item_id}".encode()).hexdigest()


async def rebuild_outbox(
    client: Client, key: DeploymentKey, runs: list[WorkflowExecution]
) -> OutboxRows:
    """The rows of the outbox whose runs these are, oldest first."""
    outbox_id = runs[-1].id
    items: dict[str, OutboxItem] = {}
    outcomes: dict[str, tuple[SendOutcome, datetime | None]] = {}
    rows = OutboxRows()
    for execution in runs:
        run = await read_run(client, execution)
        started = await decode(client, run.input, OutboxInput)
        if started is not None and started.state is not None:
            for item in started.state.pending:
                items.setdefault(item.id, item)
            for item_id, outcome in started.state.outcomes.items():
                outcomes.setdefault(item_id, (outcome, None))
        for signal in run.signalled("enqueue"):
            if (signalled := await decode(client, signal.payloads, OutboxItem)) is not None:
                items.setdefault(signalled.id, signalled)
        for send in run.activities:
            if send.activity_type != "send_chat":
                continue
            asked = await decode(client, send.input, SendItem)
            if asked is None:
                continue
            whose = item_key(asked.agent_id, asked.channel_id, asked.item.id)
            by = f"{run.run_id}/{send.activity_id}"
            rows.spent.append(Spent(whose, by, send.at or execution.start_time))
            if send.failure is not None:
                failed = SendOutcome(status="failed", error=send.failure)
                outcomes[asked.item.id] = (failed, send.at)
            elif send.result is not None:
                sent = await decode(client, send.result, ChatSent) or ChatSent()
                outcomes[asked.item.id] = (
                    SendOutcome(status="sent", message_id=sent.message_id, attempt=sent.attempt),
                    send.at,
                )
    for item in items.values():
        event = item.event
        if event is None or not outbox_may_write(key, event, outbox_id):
            continue  # a receipt, or not a message this deployment signed for this outbox
        known = outcomes.get(item.id)
        rows.events.append(event if known is None else _settled(event, *known))
    return rows


def _settled(event: Event, outcome: SendOutcome, at: datetime | None) -> Event:
    """The event as its outbox wrote it once sent or failed. The provider's message id stays
    out of the payload, as the projection keeps the payload the gateway wrote when it queued
    the message."""
    sent = outcome.status == "sent"
    return event.model_copy(
        update={
            "status": "delivered" if sent else "failed",
            "attempts": outcome.attempt or event.attempts + 1,
            "delivered_at": (at or event.created_at) if sent else None,
            "error": outcome.error,
        }
    )
