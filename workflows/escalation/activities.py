"""The activities a ladder runs (a rung; the check of an urgent message's `answered`), declared
by their signatures so the workflow calls them by reference without importing the code that
texts or signs. The worker registers
:class:`activities.escalation.EscalationActivities` under the same name."""

from __future__ import annotations

from temporalio import activity

from agentcomms.escalation_models import AnswerCheck, EscalationAnswered, RungResult, RungStep
from workflows.activities import declared


@activity.defn(name="fire_rung")
async def fire_rung(step: RungStep) -> RungResult:
    """Reach the human by the rung's way (or say why it cannot); a call rung hands back the
    signed call for the workflow to place."""
    raise declared()


@activity.defn(name="check_escalation_answered")
async def check_escalation_answered(check: AnswerCheck) -> EscalationAnswered:
    """The `answered` signalled to an urgent message's ladder, once the gateway's tag on it
    checks out (refused otherwise)."""
    raise declared()
