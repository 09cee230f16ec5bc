"""The client side of OutboxWorkflow: queue a send for an (agent, chat), wait to hear it went.

An item is durable once ``post`` returns (signal-with-start on the shared task queue).
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from temporalio.client import (
    Client,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)
from temporalio.service import RPCError

from agentcomms.search_attributes import AGENT_ID
from workflows.outbox import (
    OutboxInput,
    OutboxItem,
    OutboxWorkflow,
    SendStatus,
    WaitSent,
    outbox_workflow_id,
)


class Outbox:
    def __init__(self, client: Client, task_queue: str) -> None:
        self._client = client
        self._task_queue = task_queue

    async def post(self, agent_id: str, channel_id: str, item: OutboxItem) -> None:
        await self._client.start_workflow(
            OutboxWorkflow.run,
            OutboxInput(agent_id=agent_id, channel_id=channel_id),
            id=outbox_workflow_id(agent_id, channel_id),
            task_queue=self._task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal="enqueue",
            start_signal_args=[item],
            static_summary=f"messages of agent {agent_id} to {channel_id}",
            # Found beside the agent's mailbox in the Temporal UI (AgentId = "backend").
            search_attributes=TypedSearchAttributes([SearchAttributePair(AGENT_ID, agent_id)]),
        )

    async def wait_sent(
        self, agent_id: str, channel_id: str, item_id: str, timeout_s: float
    ) -> SendStatus:
        """Wait until the item was sent or failed, or the timeout passes (then: still queued)."""
        handle = self._client.get_workflow_handle(outbox_workflow_id(agent_id, channel_id))
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                status = await asyncio.wait_for(
                    handle.execute_update(
                        OutboxWorkflow.wait_sent,
                        WaitSent(item_id=item_id, timeout_s=min(remaining, 300)),
                        rpc_timeout=timedelta(seconds=remaining + 5),
                    ),
                    timeout=remaining + 1,
                )
            except (
                TimeoutError,
                RPCError,
                WorkflowUpdateFailedError,
                WorkflowUpdateRPCTimeoutOrCancelledError,
            ):
                break  # no worker answered in time: the send is durable, not done
            if status.status != "moved":  # continued-as-new: ask the new run
                return status
        return SendStatus(item_id=item_id, status="queued")
