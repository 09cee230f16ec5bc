"""What an approval is started with, asked and answers."""

from __future__ import annotations

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcomms.approval_models import ApprovalRequest, ApprovalView, Decision
    from agentcomms.escalation_models import Escalation


class ApprovalInput(BaseModel):
    request: ApprovalRequest
    # Its ladder (signed by the gateway), when the agent's config has one.
    escalation: Escalation | None = None


class Decide(BaseModel):
    decision: Decision


class WaitDecided(BaseModel):
    timeout_s: float = Field(default=25, gt=0, le=300)


class Decided(BaseModel):
    """`accepted`: this answer decided it; otherwise `view.decision` is the one that did."""

    accepted: bool
    view: ApprovalView
