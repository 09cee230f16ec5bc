"""ApprovalWorkflow: one permission request waiting for its human; the first answer wins.

An answer is an update (`decide`), taken once the worker checked the gateway's tag on it for this
approval (``check_decision``, a local activity: the workflow holds no key), so whoever answers hears at once whether theirs decided it or
another came first: a human who pressed Allow after the terminal denied is told so. Every answer
tried is kept in the history with who, how, where and when. With no answer within the request's
``timeout_s`` the workflow records a timeout; what the hook then does (leave the dialog to the
terminal, or deny) follows the request's signed ``on_timeout``, read by the gateway. Once
decided it stays a while for the answers that raced it (``APPROVAL_LATE_ANSWERS``), then ends
with its view as its result, which later readers and answers read.

With an escalation ladder, the request climbs it beside the wait (:mod:`workflows.escalation`):
each rung fires only while nobody has answered, a call it placed is hung up once the request is
answered elsewhere, and the `escalation` query lists what each did.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import errors, policies
    from agentcomms.approval_models import ApprovalView, Decision, DecisionCheck
    from agentcomms.escalation_models import RungRecord
    from agentcomms.workflow_ids import APPROVAL_WORKFLOW
    from workflows.activities import failure_reason
    from workflows.approval import activities
    from workflows.approval.models import ApprovalInput, Decide, Decided, WaitDecided
    from workflows.escalation.ladder import PlacedCall, climb, hang_up_calls


@workflow.defn(name=APPROVAL_WORKFLOW)
class ApprovalWorkflow:
    @workflow.init
    def __init__(self, input: ApprovalInput) -> None:
        self._view = ApprovalView(request=input.request, opened_at=workflow.now())
        self._rungs: list[RungRecord] = []

    @workflow.update
    async def decide(self, request: Decide) -> Decided:
        """The first answer the gateway signed for this approval decides; a later one is
        recorded and told which one did. Anyone else's is refused, and changes nothing."""
        try:
            checked = await workflow.execute_local_activity(
                activities.check_decision,
                DecisionCheck(request=self._view.request, decision=request.decision),
                start_to_close_timeout=policies.TRUST_CHECK_TIMEOUT,
                retry_policy=policies.TRUST_CHECK_RETRY,
                summary="check the deployment's tag on the answer",
            )
        except (ActivityError, ApplicationError) as exc:
            reason = failure_reason(exc)
            workflow.logger.warning(
                "approval %s: refused an answer: %s", self._view.request.id, reason
            )
            raise ApplicationError(reason, type=errors.NOT_SIGNED, non_retryable=True) from None
        return self._take(checked)

    def _take(self, decision: Decision) -> Decided:
        answer = decision.model_copy(update={"at": workflow.now()})
        self._view.history.append(answer)
        if self._view.decision is not None:
            return Decided(accepted=False, view=self._view)
        self._view.decision = answer
        return Decided(accepted=True, view=self._view)

    @workflow.update
    async def wait(self, request: WaitDecided) -> ApprovalView | None:
        """The approval once decided; None when `timeout_s` passed first (ask again)."""
        try:
            await workflow.wait_condition(
                lambda: self._view.decision is not None,
                timeout=timedelta(seconds=request.timeout_s),
            )
        except TimeoutError:
            return None
        return self._view

    @workflow.query
    def view(self) -> ApprovalView:
        return self._view

    @workflow.query
    def escalation(self) -> list[RungRecord]:
        """The ladder's rungs so far: when each fired (or why not), where."""
        return self._rungs

    @workflow.run
    async def run(self, input: ApprovalInput) -> ApprovalView:
        request = input.request
        ladder = None
        calls: list[PlacedCall] = []
        if input.escalation is not None:
            ladder = asyncio.create_task(
                climb(
                    input.escalation,
                    opened_at=self._view.opened_at,
                    answered=lambda: self._view.decision is not None,
                    records=self._rungs,
                    calls=calls,
                )
            )
        try:
            await workflow.wait_condition(
                lambda: self._view.decision is not None,
                timeout=timedelta(seconds=request.timeout_s),
                timeout_summary="no answer in time",
            )
        except TimeoutError:
            self._take(
                Decision(
                    approval_id=request.id,
                    behavior="timeout",
                    message=(
                        "denied: no answer in time"
                        if request.on_timeout == "deny"
                        else "left to the terminal: no answer in time"
                    ),
                    by="agentcomms",
                    via="timeout",
                )
            )
        if ladder is not None:
            await ladder  # it stops at once: the request is decided
            # A call still ringing (or waiting for a key) about a request answered elsewhere,
            # or timed out, would only disturb the human now: it says which as it hangs up.
            decision = self._view.decision
            await hang_up_calls(
                calls, timed_out=decision is not None and decision.behavior == "timeout"
            )
        # Only the late answers keep it: a waiting hook has its answer already.
        await workflow.sleep(policies.APPROVAL_LATE_ANSWERS, summary="hear late answers")
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._view
