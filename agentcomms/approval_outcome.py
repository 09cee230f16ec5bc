"""What an approval's outcome is called, for people: "allowed by alice", "answered 'blue' by
alice", "canceled in the terminal". The terminal's commands and the gateway's surfaces (chats, the
console, phones) say it in these same words; each adds where the answer came from its own way."""

from __future__ import annotations

from agentcomms.approval_models import CANCELED_IN_TERMINAL, ApprovalRequest, Decision

HOW = {"allow": "allowed", "allow_session": "allowed for the session", "deny": "denied"}
# A plan allowed is carried out; denied, the agent goes on planning.
PLAN_HOW = {"allow": "approved", "deny": "sent back to planning"}


def how_decided(
    decision: Decision, request: ApprovalRequest | None = None, *, answer_chars: int | None = None
) -> str:
    """How `decision` decided its approval, and by whom (nobody for the agent's own dialog or a
    timeout). Knowing the `request` says a plan's outcome in a plan's words and what a timeout
    did ("no answer in time: denied"); an answer in words is cut at `answer_chars`."""
    if decision.behavior == "terminal":
        if decision.message == CANCELED_IN_TERMINAL:
            return CANCELED_IN_TERMINAL
        return "answered in the terminal"
    if decision.behavior == "timeout":
        if request is None:
            return "no answer in time"
        return "no answer in time: " + (
            "denied" if request.on_timeout == "deny" else "left to the terminal"
        )
    if decision.behavior == "answer":
        answer = decision.answer or ""
        if answer_chars is not None and len(answer) > answer_chars:
            answer = answer[:answer_chars] + "…"
        how = f"answered {answer!r}"
    else:
        words = PLAN_HOW if request is not None and request.ask == "plan" else HOW
        how = words.get(decision.behavior, decision.behavior)
    return f"{how} by {decision.by}"
