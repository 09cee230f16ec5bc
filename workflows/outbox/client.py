"""How everyone else reaches an outbox: queue a send for an (agent, chat), wait to hear it went.

The gateway and the mailbox's receipts (through the workers) use this one client; the outbox's
workflow id is spelled in :mod:`agentcomms.workflow_ids`, and its signal and update are called by
reference.

An item is durable once ``post`` returns (signal-with-start on the shared task queue). Every
item (and the message it settles) leaves here signed with the deployment key, bound to its
outbox: the send and the projection write refuse anything else (:mod:`agentcomms.trust`).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy

from agentcomms.outbox_models import OutboxItem
from agentcomms.search_attributes import AGENT_ID
from agentcomms.trust import DeploymentKey
from agentcomms.workflow_ids import outbox_workflow_id
from workflows.outbox.models import OutboxInput, SendStatus, WaitSent
from workflows.outbox.workflow import OutboxWorkflow
from workflows.updates import wait_update


def outbox_handle(
    client: Client, agent_id: str, channel_id: str
) -> WorkflowHandle[OutboxWorkflow, None]:
    """The outbox of (agent, chat), to signal, query or describe (its latest run)."""
    return client.get_workflow_handle_for(
        OutboxWorkflow.run, outbox_workflow_id(agent_id, channel_id)
    )


class Outbox:
    def __init__(self, client: Client, task_queue: str, *, key: DeploymentKey) -> None:
        self._client = client
        self._task_queue = task_queue
        self._key = key

    async def post(self, agent_id: str, channel_id: str, item: OutboxItem) -> None:
        if item.event is not None:
            item = item.model_copy(update={"event": self._key.sign_event(item.event)})
        item = self._key.sign_outbox_item(agent_id, channel_id, item)
        await self._client.start_workflow(
            OutboxWorkflow.run,
            OutboxInput(agent_id=agent_id, channel_id=channel_id),
            id=outbox_workflow_id(agent_id, channel_id),
            task_queue=self._task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            # Signal-with-start names its signal by string; the name is read off the handler.
            start_signal=workflow._SignalDefinition.must_name_from_fn_or_str(
                OutboxWorkflow.enqueue
            ),
            start_signal_args=[item],
            static_summary=f"messages of agent {agent_id} to {channel_id}",
            # Found beside the agent's mailbox in the Temporal UI (AgentId = "backend").
            search_attributes=TypedSearchAttributes([SearchAttributePair(AGENT_ID, agent_id)]),
        )

    async def wait_sent(
        self, agent_id: str, channel_id: str, item_id: str, timeout_s: float
    ) -> SendStatus:
        """Wait until the item was sent or failed, or the timeout passes (then: still queued)."""
        status: SendStatus | None = await wait_update(
            outbox_handle(self._client, agent_id, channel_id),
            OutboxWorkflow.wait_sent,
            lambda seconds: WaitSent(item_id=item_id, timeout_s=seconds),
            timeout_s,
            moved=lambda s: s.status == "moved",
        )
        return status or SendStatus(item_id=item_id, status="queued")
