"""EscalationWorkflow: an agent's urgent message finding its human (``escalation-<agent>``).

It climbs the agent's ladder like a permission request does, and stops once the human writes to
the agent from any surface (`answered`, which the gateway signals). An `answered` anyone else
signals only stops the ladder early: nothing is typed or decided by it. Its result, and the
`rungs` query, list what each rung did, for `trace`.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcomms.escalation_models import RungRecord
    from agentcomms.workflow_ids import ESCALATION_WORKFLOW
    from workflows.call import CallWorkflow, Ended
    from workflows.escalation.ladder import climb
    from workflows.escalation.models import Answered, EscalationInput


@workflow.defn(name=ESCALATION_WORKFLOW)
class EscalationWorkflow:
    @workflow.init
    def __init__(self, input: EscalationInput) -> None:
        self._answered: Answered | None = None
        self._rungs: list[RungRecord] = []

    @workflow.signal
    def answered(self, answered: Answered) -> None:
        if self._answered is None:
            self._answered = answered

    @workflow.query
    def rungs(self) -> list[RungRecord]:
        return self._rungs

    @workflow.run
    async def run(self, input: EscalationInput) -> list[RungRecord]:
        calls: list[workflow.ChildWorkflowHandle[CallWorkflow, Ended]] = []
        await climb(
            input.escalation,
            opened_at=workflow.now(),
            answered=lambda: self._answered is not None,
            records=self._rungs,
            calls=calls,
        )
        # The ladder ends with the call its last rung placed (whose answer reaches the agent).
        await asyncio.gather(*calls, return_exceptions=True)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._rungs
