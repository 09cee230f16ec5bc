"""The pane activities a worker runs: typing and interrupting, for the deployment only.

Before a key is pressed, the event and the pane's registration must carry tags made with the
deployment key (:mod:`agentcomms.trust`). The check sits here, where the text would be typed,
because anyone who reaches Temporal can signal a mailbox, and a history can be altered after the
fact; the workflow cannot check (its code must not hold the key), so it passes the tags along.

- An event that fails is refused as ``NotSignedByDeployment``: the mailbox records it rejected
  and moves on.
- An untagged event is typed only when it is a message that was already waiting when the
  deployment began to sign (an upgrade from an agentcomms that did not), and the projection, which
  listed it then, still holds it waiting with the same id, agent and content. A forger can copy
  such a message's id but not change what it says, and cannot add one to that list.
- A registration that fails is refused as ``RegistrationNotSigned``: the pane it names is not the
  agent's, so its messages wait, as for a missing pane, until the agent is registered again.
- An unregister is checked here too, before the mailbox obeys it: one that fails is ignored, so
  nobody but the deployment can take an agent offline.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import delivery
from agentcomms import errors, metrics
from agentcomms.models import (
    DeliverBatch,
    DeliverRequest,
    DeliveryOutcome,
    Event,
    InterruptRequest,
    Registration,
    Unregister,
    utcnow,
)
from agentcomms.store import PROJECTION_UNAVAILABLE, Store
from agentcomms.trust import DeploymentKey, same_message

MAILBOX_PREFIX = "agent-"
# The mailbox remembers the last 2,000 event ids and the pane about 1,000: a genuine event
# signalled again once both have forgotten it (a copy taken from an old history) would be typed
# twice. The projection remembers every delivery; it is asked about events older than this, which
# only a backlog or such a copy brings, so a message that comes and goes costs no read.
ASK_THE_PROJECTION_AFTER = timedelta(minutes=5)


class SignedDelivery:
    def __init__(self, key: DeploymentKey, store: Store) -> None:
        self._key = key
        self._store = store

    @activity.defn(name="deliver_to_pane")
    async def deliver_to_pane(self, req: DeliverRequest) -> DeliveryOutcome:
        """Type one event's text into its pane, once the deployment's tags check out."""
        await self._check(req.event, req.registration)
        if await self._typed_before(req.event):
            return DeliveryOutcome(event_id=req.event_id, typed=False)
        outcome = await delivery.deliver_to_pane(req)
        await self._record([(req, outcome)])
        return outcome

    @activity.defn(name="deliver_batch_to_pane")
    async def deliver_batch_to_pane(self, batch: DeliverBatch) -> list[DeliveryOutcome]:
        """Type a backlog's messages into their pane, in order: those whose tags check out, in
        as few tmux clients as can carry them; the others are answered as rejected. Answers
        for the first messages, in order, as many as it got through (a failure on the first is
        raised; the mailbox sends the rest again)."""
        answers: list[DeliveryOutcome | None] = []  # None: to be typed
        to_type: list[DeliverRequest] = []
        for req in batch.requests:
            try:
                await self._check(req.event, req.registration)
            except ApplicationError as exc:
                if exc.type != errors.NOT_SIGNED:
                    raise  # the registration: the pane is not the agent's, for all of them
                answers.append(
                    DeliveryOutcome(event_id=req.event_id, typed=False, rejected=exc.message)
                )
                continue
            if await self._typed_before(req.event):
                answers.append(DeliveryOutcome(event_id=req.event_id, typed=False))
                continue
            answers.append(None)
            to_type.append(req)
        typed: list[DeliveryOutcome] = []
        if to_type:
            try:
                typed = await delivery.deliver_batch_to_pane(to_type)
            except ApplicationError:
                if answers[0] is None:
                    raise
                # Those answered before it stand; the mailbox meets the failure again next.
        typed_in_order = iter(typed)
        outcomes: list[DeliveryOutcome] = []
        for answer in answers:
            answer = answer or next(typed_in_order, None)
            if answer is None:
                break
            outcomes.append(answer)
        answered = zip(batch.requests[: len(outcomes)], outcomes, strict=True)
        await self._record([(req, o) for req, o in answered if o.rejected is None])
        return outcomes

    async def _record(self, typed: list[tuple[DeliverRequest, DeliveryOutcome]]) -> None:
        """Write the typed events the mailbox asked to have recorded (`settled`) to the
        projection, and mark their outcomes recorded; when the projection cannot take them now,
        the mailbox writes them: typing must never look failed for the projection's sake."""
        now = utcnow()
        asked = [
            (outcome, req.settled.model_copy(
                update={"delivered_at": now, "note": outcome.cut_note(req.max_chars)}
            ))
            for req, outcome in typed
            if req.settled is not None
        ]  # fmt: skip
        settled = [event for _, event in asked]
        if not settled:
            return
        try:
            await self._store.settle_events(settled)
        except PROJECTION_UNAVAILABLE as exc:
            activity.logger.warning("%s typed; the mailbox will record it: %s", settled[0].id, exc)
            return
        metrics.settled(settled)
        for outcome, _ in asked:
            outcome.recorded = True

    @activity.defn(name="interrupt_pane")
    async def interrupt_pane(self, req: InterruptRequest) -> bool:
        """Press the agent's interrupt key, once the deployment's tags check out."""
        await self._check(req.event, req.registration)
        if await self._typed_before(req.event):
            return False
        return await delivery.interrupt_pane(req)

    @activity.defn(name="check_unregister")
    async def check_unregister(self, request: Unregister) -> bool:
        """Whether the deployment asked to unregister this mailbox's agent (the tag checks out)."""
        agent_id = (activity.info().workflow_id or "").removeprefix(MAILBOX_PREFIX)
        if self._key.unregister_is_genuine(agent_id, request):
            return True
        activity.logger.warning(
            "ignored an unregister of %s: not signed by this deployment (it stays registered)",
            agent_id,
        )
        return False

    async def _check(self, event: Event | None, registration: Registration | None) -> None:
        # Whose mailbox asks: an event signed for one agent must not be typed for another.
        agent_id = activity.info().workflow_id or ""
        agent_id = agent_id.removeprefix(MAILBOX_PREFIX)
        if event is None or not await self._event_is_genuine(agent_id, event):
            activity.logger.warning(
                "refused %s for %s: not signed by this deployment",
                event.id if event else "an event",
                agent_id,
            )
            raise ApplicationError(
                "not signed by this deployment: it did not come through agentcomms (or was "
                "altered since), so it was not typed",
                type=errors.NOT_SIGNED,
                non_retryable=True,
            )
        if registration is None or not self._key.registration_is_genuine(agent_id, registration):
            activity.logger.warning(
                "refused to type %s: the registration of %s is not signed by this deployment",
                event.id,
                agent_id,
            )
            raise ApplicationError(
                f"its pane's registration is not signed by this deployment; register {agent_id} "
                "again (`agentcomms agents register`)",
                type=errors.REGISTRATION_NOT_SIGNED,
                non_retryable=True,
            )

    async def _typed_before(self, event: Event | None) -> bool:
        """Whether the projection shows this (old) event typed already: then it is not again."""
        if event is None or utcnow() - event.created_at < ASK_THE_PROJECTION_AFTER:
            return False
        try:
            stored = await self._store.get_event(event.id)
        except PROJECTION_UNAVAILABLE as exc:
            # The pane's own record still stands guard; a projection hiccup must not fail it.
            activity.logger.warning("could not ask the projection about %s: %s", event.id, exc)
            return False
        if stored is None or stored.status != "delivered" or stored.agent_id != event.agent_id:
            return False
        activity.logger.warning(
            "%s was typed on %s already (a copy signalled again?): not typed twice",
            event.id,
            stored.delivered_at,
        )
        return True

    async def _event_is_genuine(self, agent_id: str, event: Event) -> bool:
        if event.agent_id != agent_id:
            return False
        if event.signature is not None:
            return self._key.event_is_genuine(event)
        # Untagged: genuine only as a message that waited through the upgrade to signing. A
        # projection that cannot be read refuses nothing for good: the activity fails and the
        # mailbox tries again.
        recorded = await self._store.waiting_since_before_signing(agent_id, event.id)
        return recorded is not None and same_message(recorded, event)
