"""What a call checks before it acts: the deployment's tag on its input and on each line event.

Temporal authenticates no one: anyone who reaches it can start ``CallWorkflow`` or signal a
``line_event`` (a forged "heard" would be taken for the human's answer). The workflow holds no
key, so each check is a local activity (``check_call``, ``check_line_event``, ``check_turn``)
whose answer, the input or event as verified, is all the call acts on; so is an update asking
the call to say something or hang up (a forger's words would be said in the agent's call). A refusal is the check's failure in the
history, with the reason, and a warning in the worker's log.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import workflows.call.activities as activities
    from agentcomms import errors, policies
    from agentcomms.voice.models import (
        CallCheck,
        CallInput,
        End,
        LineCheck,
        LineEvent,
        Say,
        TurnCheck,
    )
    from workflows.activities import failure_cause, failure_reason


class CallRefused(Exception):
    """The call's input is not the deployment's; the sentence says why."""


async def checked_call(input: CallInput) -> CallInput:
    """The input as verified; `CallRefused` when the deployment did not sign it."""
    try:
        return await workflow.execute_local_activity(
            activities.check_call,
            CallCheck(call=input, started_at=workflow.info().start_time),
            start_to_close_timeout=policies.TRUST_CHECK_TIMEOUT,
            retry_policy=policies.TRUST_CHECK_RETRY,
            summary="check the deployment's tag on the call",
        )
    except (ActivityError, ApplicationError) as exc:
        reason = failure_reason(exc)
        refused = f"call {input.call_id} refused: {reason}"
        workflow.logger.warning("%s", refused)
        raise CallRefused(refused) from None


async def checked_line_event(call_id: str, event: LineEvent) -> LineEvent | None:
    """The event as verified, or None when it is not the deployment's (then it changes nothing)."""
    try:
        return await workflow.execute_local_activity(
            activities.check_line_event,
            LineCheck(call_id=call_id, event=event),
            start_to_close_timeout=policies.TRUST_CHECK_TIMEOUT,
            retry_policy=policies.TRUST_CHECK_RETRY,
            summary=f"check the tag on a line event ({event.kind})",
        )
    except (ActivityError, ApplicationError) as exc:
        workflow.logger.warning(
            "refused a %s line event of call %s: %s", event.kind, call_id, failure_cause(exc)
        )
        return None


async def checked_turn(call_id: str, turn: Say | End, said: set[str]) -> None:
    """Nothing when the gateway signed this turn for this call and the call has not taken it
    before (`said`: the ids taken); otherwise the refusal, for whoever sent it."""
    what = "words" if isinstance(turn, Say) else "goodbye"
    if turn.id in said:
        refused = f"these {what} were asked of call {call_id} already (a copy sent again?)"
        workflow.logger.warning("%s: not said twice", refused)
        raise ApplicationError(refused, type=errors.NOT_SIGNED, non_retryable=True)
    try:
        await workflow.execute_local_activity(
            activities.check_turn,
            TurnCheck(call_id=call_id, say=turn)
            if isinstance(turn, Say)
            else TurnCheck(call_id=call_id, end=turn),
            start_to_close_timeout=policies.TRUST_CHECK_TIMEOUT,
            retry_policy=policies.TRUST_CHECK_RETRY,
            summary=f"check the tag on the agent's {what}",
        )
    except (ActivityError, ApplicationError) as exc:
        reason = failure_reason(exc)
        workflow.logger.warning("refused %s for call %s: %s", what, call_id, reason)
        raise ApplicationError(reason, type=errors.NOT_SIGNED, non_retryable=True) from None
    said.add(turn.id)
