"""Climbing one escalation ladder inside the workflow that waits for the answer.

Each rung waits on a durable timer for its `after_s` (and, past the first, for the end of quiet
hours unless the request overrides them), then fires only if nobody has answered anywhere: the
answer is the workflow's own state, so an answer on any surface stops the ladder at once. What a
rung does (an SMS, a call placed) runs as the local activity ``fire_rung``, which acts only on the
ladder the gateway signed; a call rung's call is this workflow's child. Every rung leaves a
:class:`RungRecord` for `trace`. Once the request is answered, :func:`hang_up_calls` hangs up a
call of its ladder that still rings or still waits for the human's answer, and its rung's record
says how the call ended. The human's phone takes one call at a time: a call rung that finds it on
another call waits on durable timers (that call hears this request too) and places its own call
only once that one ended with the request still open.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import policies
    from agentcomms.escalation_models import Escalation, RungRecord, RungStep
    from agentcomms.voice.models import LineEvent
    from agentcomms.workflow_ids import call_workflow_id
    from workflows.activities import failure_reason
    from workflows.call import CallWorkflow, Ended
    from workflows.escalation import activities

# How long a request's workflow waits, once answered, for its ladder's calls to end.
CALLS_END_WAIT = timedelta(minutes=2)


@dataclass
class PlacedCall:
    """A call a rung placed: the child, its rung's record, and its signed "withdrawn" (and the
    one for a request nobody answered in time)."""

    handle: workflow.ChildWorkflowHandle[CallWorkflow, Ended]
    record: RungRecord
    withdraw: LineEvent | None
    withdraw_timed_out: LineEvent | None = None


async def climb(
    escalation: Escalation,
    *,
    opened_at: datetime,
    answered: Callable[[], bool],
    records: list[RungRecord],
    calls: list[PlacedCall] | None = None,
) -> None:
    """Fire the ladder's rungs in turn until one is answered; `records` grows as it goes, and
    `calls` with the calls its rungs placed."""
    for n, rung in enumerate(escalation.rungs):
        due = opened_at + timedelta(seconds=rung.after_s)
        held = None
        if n > 0 and escalation.quiet_hours is not None and not escalation.overrides_quiet:
            held = escalation.quiet_hours.over_at(max(due, workflow.now()))
        wait_s = ((held or due) - workflow.now()).total_seconds()
        if wait_s > 0 and not answered():
            try:
                await workflow.wait_condition(
                    answered,
                    timeout=timedelta(seconds=wait_s),
                    timeout_summary=f"rung {n + 1}: {rung.via}"
                    + (" (after quiet hours)" if held else ""),
                )
            except TimeoutError:
                pass
        if answered():
            for m, left in enumerate(escalation.rungs[n:], start=n):
                records.append(
                    RungRecord(
                        rung=m + 1,
                        via=left.via,
                        due_at=opened_at + timedelta(seconds=left.after_s),
                        outcome="stopped",
                        detail="not fired: answered before it was due",
                        held_until=held if m == n else None,
                    )
                )
            return
        records.append(
            await _fire(escalation, n, due=due, held=held, calls=calls, answered=answered)
        )


async def _fire(
    escalation: Escalation,
    n: int,
    *,
    due: datetime,
    held: datetime | None,
    calls: list[PlacedCall] | None,
    answered: Callable[[], bool],
) -> RungRecord:
    rung = escalation.rungs[n]
    record = RungRecord(
        rung=n + 1, via=rung.via, due_at=due, at=workflow.now(), outcome="fired", detail=""
    )
    if held is not None:
        record.held_until = held
    busy: str | None = None
    while True:
        try:
            result = await workflow.execute_local_activity(
                activities.fire_rung,
                RungStep(
                    escalation=escalation,
                    rung=n,
                    started_at=workflow.info().start_time,
                    now=workflow.now(),
                ),
                start_to_close_timeout=policies.ESCALATION_RUNG_TIMEOUT,
                retry_policy=policies.ESCALATION_RUNG_RETRY,
                summary=f"rung {n + 1}: {rung.via}",
            )
        except (ActivityError, ApplicationError) as exc:
            reason = failure_reason(exc)
            workflow.logger.warning("rung %d (%s) failed: %s", n + 1, rung.via, reason)
            record.outcome, record.detail = "failed", f"failed: {reason}"
            return record
        if result.line_busy is None:
            break
        # One call per human at a time: the call in progress hears this request too; if it
        # ends with this one still open, this rung places its own call then.
        busy = result.line_busy
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                answered,
                timeout=policies.ESCALATION_LINE_BUSY_RECHECK,
                timeout_summary=f"rung {n + 1}: the human's phone is on call {busy}",
            )
        if answered():
            record.outcome = "stopped"
            record.detail = f"not fired: answered while the human's phone was on call {busy}"
            return record
        record.at = workflow.now()
    record.detail = result.detail
    if busy is not None:
        record.detail += f" (once call {busy} had ended)"
    if not result.fired:
        record.outcome = "skipped"
    elif result.call is not None:
        # The call is a child of this workflow: its history is beside the request's, and it
        # outlives the request (the human may still be talking when the answer comes).
        placed = await workflow.start_child_workflow(
            CallWorkflow.run,
            result.call,
            id=call_workflow_id(result.call.call_id),
            task_queue=workflow.info().task_queue,
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            static_summary=f"escalation call for {escalation.kind} {escalation.subject_id}",
        )
        if calls is not None:
            calls.append(PlacedCall(placed, record, result.withdraw, result.withdraw_timed_out))
    return record


async def hang_up_calls(calls: list[PlacedCall], *, timed_out: bool = False) -> None:
    """The request was answered (or, `timed_out`, nobody answered it in time): each call its
    ladder placed is withdrawn (a call still ringing is canceled; one waiting for the human's
    answer says which and hangs up; one where the human just answered ends on its own), and its
    rung's record tells how it ended."""
    for placed in calls:
        # A call placed before calls carried a timeout's own words is told "answered elsewhere".
        withdraw = (timed_out and placed.withdraw_timed_out) or placed.withdraw
        if withdraw is None or placed.handle.done():
            continue
        try:
            await placed.handle.signal(CallWorkflow.line_event, withdraw)
        except Exception as exc:  # it ended in the meantime
            workflow.logger.info("call %s not withdrawn: %s", placed.handle.id, exc)
    for placed in calls:
        try:
            await workflow.wait_condition(
                placed.handle.done, timeout=CALLS_END_WAIT, timeout_summary="the call's end"
            )
            ended = placed.handle.result()
        except TimeoutError:
            placed.record.detail += "; the call was still up after the answer"
            continue
        except Exception as exc:  # the call failed: its own history says why
            placed.record.detail += f"; the call failed: {exc}"
            continue
        placed.record.detail += f"; the call ended ({ended.status}): {ended.reason}"
