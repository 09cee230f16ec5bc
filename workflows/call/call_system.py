"""The call system's part of a call (Twilio): placing it, playing a turn on it, hanging it up.

Each is a local activity; a call system that fails to hear of a turn or of the end is logged and
the call goes on (a turn it never played times out like any other). Workflow code: runs inside
the call's workflow.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import workflows.call.activities as activities
    from agentcomms import policies
    from agentcomms.voice.models import LineEvent, LiveCall, PlaceCall
    from workflows.activities import failure_cause, failure_reason
    from workflows.call.models import CallInput


async def place(call: CallInput) -> LiveCall | LineEvent:
    """The call placed at the call system, or the ring's outcome when it could not be."""
    try:
        return await workflow.execute_local_activity(
            activities.place_twilio_call,
            PlaceCall(call=call),
            start_to_close_timeout=policies.CALL_SYSTEM_TIMEOUT,
            retry_policy=policies.CALL_SYSTEM_RETRY,
            summary=f"ring {call.to_number or 'the human'}",
        )
    except (ActivityError, ApplicationError) as exc:
        return LineEvent(kind="failed", detail=failure_reason(exc))


async def play(live: LiveCall, turn: int) -> None:
    await _told(activities.update_twilio_call, live, f"play turn {turn}")


async def hang_up(live: LiveCall, *, answered: bool) -> None:
    """Hang up at the call system (the line may still ring, or be connected)."""
    await _told(
        activities.end_twilio_call, live.model_copy(update={"answered": answered}), "hang up"
    )


async def _told(
    activity: Callable[[LiveCall], Awaitable[None]], live: LiveCall, summary: str
) -> None:
    try:
        await workflow.execute_local_activity(
            activity,
            live,
            start_to_close_timeout=policies.CALL_SYSTEM_TIMEOUT,
            retry_policy=policies.CALL_SYSTEM_RETRY,
            summary=summary,
        )
    except (ActivityError, ApplicationError) as exc:
        # The call goes on; a turn the call system never hears of times out like any other.
        workflow.logger.warning("%s failed: %s", activity.__name__, failure_cause(exc))
