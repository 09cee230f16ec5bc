"""The pane activities a worker runs: typing and interrupting, for the deployment only.

Before a key is pressed, the event and the pane's registration must carry tags made with the
deployment key (:mod:`agentcomms.trust`). The check sits here, where the text would be typed,
because anyone who reaches Temporal can signal a mailbox, and a history can be altered after the
fact; the workflow cannot check (its code must not hold the key), so it passes the tags along.

- An event that fails is refused as ``NotSignedByDeployment``: the mailbox records it rejected
  and moves on.
- A registration that fails is refused as ``RegistrationNotSigned``: the pane it names is not the
  agent's, so its messages wait, as for a missing pane, until the agent is registered again.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import delivery
from agentcomms import errors
from agentcomms.models import DeliverRequest, DeliveryOutcome, Event, InterruptRequest, Registration
from agentcomms.trust import DeploymentKey

MAILBOX_PREFIX = "agent-"


class SignedDelivery:
    def __init__(self, key: DeploymentKey) -> None:
        self._key = key

    @activity.defn(name="deliver_to_pane")
    async def deliver_to_pane(self, req: DeliverRequest) -> DeliveryOutcome:
        """Type one event's text into its pane, once the deployment's tags check out."""
        self._check(req.event, req.registration)
        return await delivery.deliver_to_pane(req)

    @activity.defn(name="interrupt_pane")
    async def interrupt_pane(self, req: InterruptRequest) -> bool:
        """Press the agent's interrupt key, once the deployment's tags check out."""
        self._check(req.event, req.registration)
        return await delivery.interrupt_pane(req)

    def _check(self, event: Event | None, registration: Registration | None) -> None:
        # Whose mailbox asks: an event signed for one agent must not be typed for another.
        agent_id = activity.info().workflow_id or ""
        agent_id = agent_id.removeprefix(MAILBOX_PREFIX)
        if event is None or not self._key.event_is_genuine(event) or event.agent_id != agent_id:
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
