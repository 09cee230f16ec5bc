"""The activity a ladder's rung runs, declared by its signature so the workflow calls it by
reference without importing the code that texts or signs. The worker registers
:class:`activities.escalation.EscalationActivities` under the same name."""

from __future__ import annotations

from temporalio import activity

from agentcomms.escalation_models import RungResult, RungStep
from workflows.activities import declared


@activity.defn(name="fire_rung")
async def fire_rung(step: RungStep) -> RungResult:
    """Reach the human by the rung's way (or say why it cannot); a call rung hands back the
    signed call for the workflow to place."""
    raise declared()
