"""The activity an approval runs (the check of an answer's tag), declared by its signature so the
workflow calls it by reference without importing the code that holds the key. The worker
registers :class:`activities.approvals.ApprovalActivities` under the same name."""

from __future__ import annotations

from temporalio import activity

from agentcomms.approval_models import Decision, DecisionCheck
from workflows.activities import declared


@activity.defn(name="check_decision")
async def check_decision(check: DecisionCheck) -> Decision:
    """The answer, once the gateway's tag on it for this approval checks out."""
    raise declared()
