"""OutboxWorkflow: an agent's messages to one chat, in order.

One workflow per (agent, channel) keeps an agent's answers to a chat in the order it sent them,
while a slow or rate-limited chat holds up nobody else. It runs on the shared task queue: sending
needs no pane. Each item is one activity with an explicit retry policy (a provider's rate limit
sets the next delay, network trouble backs off, a permanent refusal fails at once). The activity
reads the provider's credentials from the worker's configuration: none travel in this history.
The workflow cannot check the deployment's tag on an item (it holds no key): the send and the
projection write do, and refuse a forged item whoever signalled it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import policies
    from agentcomms.models import Event, ProjectionUpdate
    from agentcomms.outbox_models import OutboxItem, SendItem
    from agentcomms.workflow_ids import OUTBOX_WORKFLOW
    from workflows.outbox import activities
    from workflows.outbox.models import OutboxInput, OutboxState, SendOutcome, SendStatus, WaitSent

SEEN_IDS_KEPT = 1000
OUTCOMES_KEPT = 200


@workflow.defn(name=OUTBOX_WORKFLOW)
class OutboxWorkflow:
    @workflow.init
    def __init__(self, input: OutboxInput) -> None:
        self._s = input.state or OutboxState(agent_id=input.agent_id, channel_id=input.channel_id)
        self._seen = set(self._s.seen_ids)
        self._continuing = False

    @workflow.signal
    def enqueue(self, item: OutboxItem) -> None:
        """Queue a send; an item whose id was seen before is ignored."""
        if item.id in self._seen or self._overtaken(item):
            return
        self._seen.add(item.id)
        self._s.seen_ids.append(item.id)
        self._s.pending.append(item)

    def _overtaken(self, item: OutboxItem) -> bool:
        # The mailbox asks for "typed" as soon as it typed the message, which may be before the
        # gateway's "queued" arrives; sent after it, "queued" would take the place of "typed".
        if item.send.kind != "receipt" or item.send.stage != "queued":
            return False
        return item.id.removesuffix(":queued") + ":typed" in self._seen

    @workflow.update
    async def wait_sent(self, request: WaitSent) -> SendStatus:
        """Answer once the item is sent (or failed), or say it is still queued at the timeout."""
        try:
            await workflow.wait_condition(
                lambda: request.item_id in self._s.outcomes or self._continuing,
                timeout=timedelta(seconds=request.timeout_s),
            )
        except TimeoutError:
            pass
        outcome = self._s.outcomes.get(request.item_id)
        if outcome is not None:
            return SendStatus(item_id=request.item_id, **outcome.model_dump())
        if self._continuing:
            return SendStatus(item_id=request.item_id, status="moved")
        queued = any(i.id == request.item_id for i in self._s.pending)
        return SendStatus(item_id=request.item_id, status="queued" if queued else "unknown")

    @workflow.query
    def pending(self) -> int:
        return len(self._s.pending)

    @workflow.run
    async def run(self, input: OutboxInput) -> None:
        while True:
            await workflow.wait_condition(
                lambda: bool(self._s.pending) or workflow.info().is_continue_as_new_suggested()
            )
            if workflow.info().is_continue_as_new_suggested():
                break
            item = self._s.pending[0]
            outcome = await self._send(item)
            self._s.pending.pop(0)
            self._remember(item.id, outcome)
            if item.event is not None:
                await self._settle(item.event, outcome)
        self._continuing = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        self._s.seen_ids = self._s.seen_ids[-SEEN_IDS_KEPT:]
        workflow.continue_as_new(
            OutboxInput(agent_id=self._s.agent_id, channel_id=self._s.channel_id, state=self._s)
        )

    async def _send(self, item: OutboxItem) -> SendOutcome:
        send = item.send
        what = f"receipt ({send.stage}) for" if send.kind == "receipt" else "send"
        try:
            sent = await workflow.execute_activity(
                activities.send_chat,
                SendItem(agent_id=self._s.agent_id, channel_id=self._s.channel_id, item=item),
                start_to_close_timeout=policies.CHAT_SEND_TIMEOUT,
                schedule_to_close_timeout=(
                    policies.CHAT_RECEIPT_GIVE_UP
                    if send.kind == "receipt"
                    else policies.CHAT_SEND_GIVE_UP
                ),
                retry_policy=policies.CHAT_SEND_RETRY,
                summary=f"{what} {item.id} on {self._s.channel_id}",
            )
        except ActivityError as exc:
            message = _reason(exc)
            workflow.logger.warning("%s on %s failed: %s", item.id, self._s.channel_id, message)
            return SendOutcome(status="failed", error=message)
        self._s.sent_count += 1
        return SendOutcome(status="sent", message_id=sent.message_id, attempt=sent.attempt)

    def _remember(self, item_id: str, outcome: SendOutcome) -> None:
        self._s.outcomes[item_id] = outcome
        while len(self._s.outcomes) > OUTCOMES_KEPT:
            self._s.outcomes.pop(next(iter(self._s.outcomes)))
        if len(self._s.seen_ids) > SEEN_IDS_KEPT * 2:
            drop = self._s.seen_ids[: len(self._s.seen_ids) - SEEN_IDS_KEPT]
            self._s.seen_ids = self._s.seen_ids[-SEEN_IDS_KEPT:]
            self._seen.difference_update(drop)

    async def _settle(self, event: Event, outcome: SendOutcome) -> None:
        sent = outcome.status == "sent"
        payload = dict(event.payload)
        if outcome.message_id:
            payload["message_id"] = outcome.message_id
        settled = event.model_copy(
            update={
                "status": "delivered" if sent else "failed",
                # A failed send's tries were counted by its activity (the store keeps the most).
                "attempts": outcome.attempt or event.attempts + 1,
                "delivered_at": workflow.now() if sent else None,
                "error": outcome.error,
                "payload": payload,
            }
        )
        await workflow.execute_local_activity(
            activities.record_projection,
            ProjectionUpdate(events=[settled]),
            start_to_close_timeout=policies.PROJECTION_TIMEOUT,
            retry_policy=policies.PROJECTION_RETRY,
            summary=f"record {event.id} {settled.status}",
        )


def _reason(exc: ActivityError) -> str:
    """The sentence that says why: the activity's own error, also behind a give-up timeout."""
    cause: BaseException | None = exc.cause
    while cause is not None:
        if isinstance(cause, ApplicationError):
            return cause.message
        cause = cause.__cause__
    return str(exc.cause or exc)
