"""Receipts a mailbox asks for: queued to the outbox of the chat the message came from.

Run as a local activity beside the delivery, on the agent's host worker, once a message from a
chat is typed: the mailbox that typed it asks for the "typed" receipt itself, so no process has
to stay up watching for it. Posting is signal-with-start of the outbox workflow (it may not run
yet), which workflow code cannot do; the outbox ignores an item it has seen, so a retried
activity or a replayed workflow task sends no second receipt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import activity

from agentcomms.outbox_models import OutboxItem, QueueReceipt

PostToOutbox = Callable[[str, str, OutboxItem], Awaitable[None]]


class ReceiptActivities:
    def __init__(self, post: PostToOutbox) -> None:
        self._post = post

    @activity.defn(name="queue_receipt")
    async def queue_receipt(self, req: QueueReceipt) -> None:
        """Queue a receipt in the outbox of (agent, channel), starting the outbox if need be."""
        await self._post(req.agent_id, req.channel_id, req.item)
