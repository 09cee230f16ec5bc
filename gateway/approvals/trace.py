"""`trace K7QF`: one permission request's life, oldest first: opened, each rung of its ladder
(when it fired, where, or why not), and every answer, the one that decided it first."""

from __future__ import annotations

import re
from typing import Any

from temporalio.client import Client

from agentcomms.approval_models import ApprovalView, Decision
from agentcomms.config import Config
from agentcomms.escalation_models import RungRecord
from agentcomms.temporal import ui_url
from agentcomms.workflow_ids import approval_workflow_id
from gateway.approvals.words import said
from workflows.approval.client import ID_ALPHABET, ID_LENGTH, Approvals

_APPROVAL_ID = re.compile(f"^[{ID_ALPHABET}]{{{ID_LENGTH}}}$", re.IGNORECASE)


def is_approval_id(text: str) -> bool:
    return bool(_APPROVAL_ID.match(text))


async def trace_approval(client: Client, cfg: Config, approval_id: str) -> dict[str, Any] | None:
    """The request's trace in the shape of a message's; None when there is no such request."""
    approvals = Approvals(client, cfg.temporal.task_queue)
    view = await approvals.view(approval_id.upper())
    if view is None:
        return None
    rungs = await approvals.rungs(view.request.id)
    r = view.request
    steps = [_step(view.opened_at, "opened", f"{r.agent_id} asks to use {r.tool}: {r.input_text}")]
    steps += [rung_step(rung) for rung in rungs]
    steps += [_answer_step(view, d) for d in view.history]
    steps.sort(key=lambda s: s["at"] or "")
    wf_id = approval_workflow_id(r.id)
    return {
        "event_id": r.id,
        "agent_id": r.agent_id,
        "type": "approval",
        "direction": "in",
        "status": "open" if view.open else said(view),
        "steps": steps,
        "why": [] if not view.open else ["nobody has answered yet"],
        "workflow_id": wf_id,
        "temporal_ui": ui_url(cfg.temporal, wf_id),
        "rungs": [rung.model_dump(mode="json") for rung in rungs],
    }


def _step(at: Any, what: str, detail: str) -> dict[str, Any]:
    return {"at": at.isoformat() if at else None, "step": what, "detail": detail}


def rung_step(rung: RungRecord) -> dict[str, Any]:
    detail = rung.detail
    if rung.held_until is not None:
        detail += f" (held by quiet hours until {rung.held_until.isoformat()})"
    what = f"rung {rung.rung}: {rung.via}" + ("" if rung.outcome == "fired" else f" {rung.outcome}")
    return _step(rung.at or rung.due_at, what, detail)


def _answer_step(view: ApprovalView, decision: Decision) -> dict[str, Any]:
    decided = view.decision is not None and decision.at == view.decision.at
    how = said(view.model_copy(update={"decision": decision}))
    return _step(decision.at, "answer" if decided else "late answer", how)
