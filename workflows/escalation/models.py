"""What an urgent message's ladder is started with and told."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcomms.escalation_models import Escalation
    from agentcomms.escalation_models import EscalationAnswered as Answered


class EscalationInput(BaseModel):
    escalation: Escalation  # signed by the gateway


__all__ = ["Answered", "EscalationInput"]
