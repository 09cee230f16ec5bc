"""The chat receipts a mailbox asks for: a human who wrote from a chat sees their message typed,
and, where the agent's hooks report, submitted: the ✍ then waits for the UserPromptSubmit that
carries the message (or for the mailbox to learn that none will: hooks missing).

Runs inside the mailbox's workflow (a local activity through the chat's outbox).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import policies
    from agentcomms.agents.state import submitted
    from agentcomms.models import Event
    from agentcomms.outbox_models import QueueReceipt, receipt_item
    from workflows.activities import failure_cause
    from workflows.mailbox import activities
    from workflows.mailbox.models import AgentState, HeldReceipt


async def typed_receipt(agent_id: str, event: Event, note: str | None) -> None:
    """Ask the chat's outbox to show the human their message was typed (and what typing cut)."""
    payload = event.payload
    item = receipt_item(
        event.id,
        provider=str(payload["provider"]),
        chat_id=str(payload["chat_id"]),
        message_id=str(payload["message_id"]),
        stage="typed",
        note=note,
    )
    try:
        await workflow.execute_local_activity(
            activities.queue_receipt,
            QueueReceipt(agent_id=agent_id, channel_id=event.channel_id, item=item),
            start_to_close_timeout=policies.MAILBOX_RECEIPT_TIMEOUT,
            schedule_to_close_timeout=policies.MAILBOX_RECEIPT_GIVE_UP,
            retry_policy=policies.MAILBOX_RECEIPT_RETRY,
            summary=f"receipt (typed) for {event.id}",
        )
    except (ActivityError, ApplicationError) as exc:
        workflow.logger.warning("typed receipt for %s not queued: %s", event.id, failure_cause(exc))


def from_chat(event: Event) -> bool:
    """A human's message from a chat provider: it names the provider's message to answer."""
    payload = event.payload
    return (
        event.type == "human_message"
        and bool(payload.get("message_id"))
        and bool(payload.get("chat_id"))
        and bool(payload.get("provider"))
    )


class Receipts:
    """The receipts of typed chat messages, each sent once its message was submitted (where
    that can be known) or at once; those held live in the mailbox's state."""

    def __init__(self, state: AgentState) -> None:
        self._s = state
        self.stopping = False  # the run continues-as-new: the next one sends what is held

    async def typed(self, event: Event, note: str | None) -> None:
        if submitted(self._s.readiness, event.id) is False:
            self._s.receipts[event.id] = HeldReceipt(event=event, note=note)
        else:
            await typed_receipt(self._s.agent_id, event, note)

    async def run(self) -> None:
        while True:
            await workflow.wait_condition(lambda: self.stopping or bool(self._released()))
            if self.stopping:
                return
            for event_id in self._released():
                held = self._s.receipts.pop(event_id)
                await typed_receipt(self._s.agent_id, held.event, held.note)

    def _released(self) -> list[str]:
        """Held receipts whose message the agent's prompt carried, or no longer awaits."""
        return [i for i in self._s.receipts if submitted(self._s.readiness, i) is not False]
