"""Receipts a mailbox asks for: queued to the outbox of the chat the message came from.

Run as a local activity beside the delivery, on the agent's host worker, once a message from a
chat is typed: the mailbox that typed it asks for the "typed" receipt itself, so no process has
to stay up watching for it. Posting is signal-with-start of the outbox workflow (it may not run
yet), which workflow code cannot do; the outbox ignores an item it has seen, so a retried
activity or a replayed workflow task sends no second receipt.

What it posts is signed with the deployment key, so it posts only for the agent's own mailbox,
running it locally, and only receipts: anyone who reaches Temporal could otherwise schedule it
to have any text signed and sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentcomms import errors
from agentcomms.outbox_models import OutboxItem, QueueReceipt
from agentcomms.workflow_ids import MAILBOX_WORKFLOW, agent_of_mailbox

PostToOutbox = Callable[[str, str, OutboxItem], Awaitable[None]]


class ReceiptActivities:
    def __init__(self, post: PostToOutbox) -> None:
        self._post = post

    @activity.defn(name="queue_receipt")
    async def queue_receipt(self, req: QueueReceipt) -> None:
        """Queue a receipt in the outbox of (agent, channel), starting the outbox if need be."""
        info = activity.info()
        mailbox_of = agent_of_mailbox(info.workflow_id or "")
        if (
            not info.is_local
            or info.workflow_type != MAILBOX_WORKFLOW
            or mailbox_of != req.agent_id
            or req.item.send.kind != "receipt"
            or req.item.event is not None
        ):
            activity.logger.warning(
                "refused a %s for %s asked by %s (%s): receipts are queued only by the "
                "agent's own mailbox",
                req.item.send.kind,
                req.agent_id,
                info.workflow_id,
                info.workflow_type,
            )
            raise ApplicationError(
                "queue_receipt queues only receipts, as a local activity of the agent's mailbox",
                type=errors.NOT_A_MAILBOX,
                non_retryable=True,
            )
        await self._post(req.agent_id, req.channel_id, req.item)
