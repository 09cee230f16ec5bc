"""An approval's one activity: the check of an answer's tag, before the answer takes the request.

The approval's workflow holds no key, and anyone who reaches Temporal can send it a `decide`
update: an answer of theirs (or a genuine one copied from another approval's history) taking the
first-answer slot would leave the human's own answer refused as late. So the workflow takes an
answer only once this, a local activity of that approval's own workflow, says the gateway signed
it for the very request that approval holds: not another approval's, nor that of an earlier
request whose short id this one drew again once Temporal forgot the old run.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentcomms import errors
from agentcomms.approval_models import Decision, DecisionCheck
from agentcomms.trust import DeploymentKey, request_digest
from agentcomms.workflow_ids import APPROVAL_WORKFLOW, approval_workflow_id


class ApprovalActivities:
    def __init__(self, key: DeploymentKey) -> None:
        self._key = key

    @activity.defn(name="check_decision")
    async def check_decision(self, check: DecisionCheck) -> Decision:
        """The answer, once the gateway's tag on it for this approval checks out."""
        info = activity.info()
        approval_id = check.request.id
        own = info.workflow_type == APPROVAL_WORKFLOW
        if not (info.is_local and own and info.workflow_id == approval_workflow_id(approval_id)):
            raise _refused(
                f"check_decision runs only as a local activity of approval {approval_id}'s own "
                f"workflow, not {info.workflow_id}",
                errors.NOT_AN_APPROVAL,
            )
        decision = check.decision
        if decision.approval_id != approval_id:
            raise _refused(
                f"this answer is approval {decision.approval_id}'s, copied into {approval_id}: "
                "it decides nothing here",
                errors.NOT_SIGNED,
            )
        unsigned = decision.answers is None or not decision.signature
        if not unsigned and decision.answers != request_digest(check.request):
            raise _refused(
                f"this answer was given to another request than the one approval {approval_id} "
                "holds now (an earlier request that drew the same id, or one put in its place): "
                "it decides nothing here, and the request waits for its human's",
                errors.NOT_SIGNED,
            )
        if not self._key.decision_is_genuine(decision, check.request):
            raise _refused(
                f"this answer to approval {approval_id} is not signed by this deployment: it did "
                "not come through agentcomms (the terminal, a chat, the console, a call), so the "
                "request waits for its human's",
                errors.NOT_SIGNED,
            )
        return decision


def _refused(reason: str, kind: str) -> ApplicationError:
    activity.logger.warning("refused %s: %s", activity.info().activity_type, reason)
    return ApplicationError(reason, type=kind, non_retryable=True)
