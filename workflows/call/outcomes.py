"""How a call's outcome is told: how a call that nobody took ends, in the words the call's
record, its history and the agent read; a turn's outcome handed to the agent's mailbox; and what
a call about a request says once that request was answered elsewhere or timed out."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import workflows.call.activities as activities
    from agentcomms import policies
    from agentcomms.models import CallStatus
    from agentcomms.voice.models import (
        WITHDRAWN_BY_THE_AGENT,
        WITHDRAWN_TIMED_OUT,
        CallInput,
        CallNotice,
        LineEvent,
    )
    from workflows.call.models import TurnResult

SUMMARY_CHARS = 80

# What ends a call that still rings (a hang-up then is a decline).
RING_ENDS = ("declined", "busy", "no-answer", "failed", "machine", "hangup", "withdrawn")
_MISSED_STATUS: dict[str, CallStatus] = {
    "declined": "declined",
    "busy": "busy",
    "failed": "failed",
    "machine": "voicemail",
    "withdrawn": "canceled",
}


def withdrawn(call: CallInput, why: str | None) -> tuple[str, str]:
    """What a ladder's call says once what it was about was settled while it waited (a request
    decided or timed out, or the human wrote to the agent after its urgent message), and why it
    ended; `why` is the withdrawn line event's detail."""
    if why == WITHDRAWN_BY_THE_AGENT:
        return "Goodbye.", "the agent ended it"
    if call.approval_id is not None and why == WITHDRAWN_TIMED_OUT:
        return (
            "Nobody answered that request in time, so it no longer waits for you. Goodbye.",
            "the request timed out",
        )
    if call.approval_id is not None:
        return "That request was answered elsewhere. Goodbye.", "the request was answered elsewhere"
    return "You have answered elsewhere already. Goodbye.", "the human answered elsewhere"


def missed(outcome: LineEvent, call: CallInput) -> tuple[CallStatus, str]:
    """The call's status and the reason, for the ring's outcome (anything but answered)."""
    reason = {
        "no-answer": f"no answer within {call.ring_timeout_s:g} s",
        "declined": "the call was declined",
        "busy": "the line was busy",
        "failed": f"the call failed: {outcome.detail or 'no reason given'}",
        "machine": "an answering machine picked up",
        "withdrawn": f"{withdrawn(call, outcome.detail)[1]} before the call was taken",
    }.get(outcome.kind, outcome.kind)
    return _MISSED_STATUS.get(outcome.kind, "no-answer"), reason


def short(text: str) -> str:
    """One line of a text for an activity's summary."""
    flat = " ".join(text.split())
    return flat if len(flat) <= SUMMARY_CHARS else flat[: SUMMARY_CHARS - 1] + "…"


async def notify(call: CallInput, result: TurnResult) -> None:
    """Hand a turn's outcome to the agent's mailbox (typed into its pane, check_messages)."""
    told = result.model_dump(include={"turn", "response", "note", "timed_out", "status"})
    notice = CallNotice(call=call, **told)
    await workflow.execute_local_activity(
        activities.post_call_answer,
        notice,
        start_to_close_timeout=policies.CALL_ANSWER_TIMEOUT,
        retry_policy=policies.CALL_ANSWER_RETRY,
        summary=f'to {call.agent_id}\'s mailbox: "{short(notice.text())}"',
    )
