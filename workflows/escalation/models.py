"""What an urgent message's ladder is started with and told."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcomms.escalation_models import Escalation


class EscalationInput(BaseModel):
    escalation: Escalation  # signed by the gateway


class Answered(BaseModel):
    """The human wrote to the agent (anywhere): the ladder has done its work."""

    via: str  # the surface: telegram, sms, cli, …
