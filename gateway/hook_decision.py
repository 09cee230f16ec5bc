"""What the hook waiting on an approval is told to do, derived from what the deployment signed
alone: the request the hook's agent opened and an answer the gateway signed for it. Anyone can put
an answer into Temporal, copy a genuine one from another approval's history, or start an
approval's workflow again with another request; none of these allows or denies anything here."""

from __future__ import annotations

import logging
from typing import Any

from agentcomms.approval_models import ApprovalRequest, ApprovalView, Decision
from agentcomms.trust import DeploymentKey

log = logging.getLogger(__name__)


def hook_decision(
    key: DeploymentKey, view: ApprovalView, approval_id: str
) -> dict[str, Any] | None:
    """What the agent's hook waiting on `approval_id` answers, in Claude Code's `decision`
    shape; None leaves the agent's own dialog to the terminal. Nothing unsigned decides, nor
    anything signed for another approval: anyone can copy a genuine request or answer from one
    approval's history into another's workflow."""
    request, decision = view.request, view.decision
    if decision is None or not key.approval_is_genuine(request):
        return None
    if request.id != approval_id:
        log.warning(
            "approval %s: its workflow holds request %s (started again by someone else?), "
            "which decides nothing for it",
            approval_id,
            request.id,
        )
        return None
    if decision.approval_id != request.id:
        log.warning(
            "approval %s: an answer to approval %s copied into it, ignored",
            request.id,
            decision.approval_id,
        )
        return None
    if decision.behavior == "timeout":
        if request.on_timeout != "deny":
            return None
        # A timeout carries no tag (the workflow records it, and holds no key): it counts
        # only once the request's time was up when the workflow took it.
        waited = (decision.at - view.opened_at).total_seconds() if decision.at else 0
        if waited < request.timeout_s:
            log.warning(
                "approval %s: a timeout put in after %.0f s of its %g s, ignored",
                request.id,
                waited,
                request.timeout_s,
            )
            return None
        return {
            "behavior": "deny",
            "message": f"No one answered this {_ASKED[request.ask]} within "
            f"{request.timeout_s:g} s, so it was denied. Go on without it, or ask again later.",
        }
    if not key.decision_is_genuine(decision, request):
        log.warning(
            "approval %s: an answer without the deployment's tag for this request, ignored",
            request.id,
        )
        return None
    if decision.behavior == "answer" and request.ask == "question" and decision.answer:
        # The hook puts the answer into the tool's input, keyed by the agent's own question.
        return {"behavior": "allow", "answer": decision.answer}
    if decision.behavior == "allow" and request.ask != "question":
        return {"behavior": "allow"}
    if decision.behavior == "allow_session" and request.ask == "permission":
        return {"behavior": "allow", "updatedPermissions": request.suggestions}
    if decision.behavior == "deny":
        return {"behavior": "deny", "message": decision.message or _denied(request, decision)}
    return None  # answered in the terminal


_ASKED = {"permission": "permission request", "question": "question", "plan": "plan"}


def _denied(request: ApprovalRequest, decision: Decision) -> str:
    if request.ask == "plan":
        return f"{decision.by} asks you to keep planning."
    if request.ask == "question":
        return f"{decision.by} declined to answer."
    return f"Denied by {decision.by}."
