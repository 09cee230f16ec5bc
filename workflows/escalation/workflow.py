"""EscalationWorkflow: an agent's urgent message finding its human (``escalation-<agent>``).

It climbs the agent's ladder like a permission request does, and stops once the human writes to
the agent from any surface (`answered`, which the gateway signals, signed). An `answered` the
deployment did not sign (anyone can signal a workflow), or one copied from an older ladder,
changes nothing: its check's failure in the history says why. Its result, and the `rungs` query,
list what each rung did, for `trace`.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import policies
    from agentcomms.escalation_models import AnswerCheck, RungRecord
    from agentcomms.workflow_ids import ESCALATION_WORKFLOW
    from workflows.activities import failure_cause
    from workflows.escalation import activities
    from workflows.escalation.ladder import PlacedCall, climb, hang_up_calls
    from workflows.escalation.models import Answered, EscalationInput


@workflow.defn(name=ESCALATION_WORKFLOW)
class EscalationWorkflow:
    @workflow.init
    def __init__(self, input: EscalationInput) -> None:
        self._escalation = input.escalation
        self._answered: Answered | None = None
        self._rungs: list[RungRecord] = []

    @workflow.signal
    async def answered(self, answered: Answered) -> None:
        try:
            checked = await workflow.execute_local_activity(
                activities.check_escalation_answered,
                AnswerCheck(escalation=self._escalation, answered=answered),
                start_to_close_timeout=policies.TRUST_CHECK_TIMEOUT,
                retry_policy=policies.TRUST_CHECK_RETRY,
                summary=f"check the tag on an answer ({answered.via})",
            )
        except (ActivityError, ApplicationError) as exc:
            workflow.logger.warning("refused an answer: %s", failure_cause(exc))
            return
        if self._answered is None:
            self._answered = checked

    @workflow.query
    def rungs(self) -> list[RungRecord]:
        return self._rungs

    @workflow.run
    async def run(self, input: EscalationInput) -> list[RungRecord]:
        calls: list[PlacedCall] = []
        await climb(
            input.escalation,
            opened_at=workflow.now(),
            answered=lambda: self._answered is not None,
            records=self._rungs,
            calls=calls,
        )
        await workflow.wait_condition(
            lambda: self._answered is not None or all(c.handle.done() for c in calls)
        )
        if self._answered is not None:
            # The human wrote to the agent: a call still ringing (or waiting to be heard) would
            # only disturb them now.
            await hang_up_calls(calls)
        # The ladder ends with the call its last rung placed (whose answer reaches the agent).
        await asyncio.gather(*(c.handle for c in calls), return_exceptions=True)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._rungs
