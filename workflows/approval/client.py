"""How the gateway reaches approvals: open one, answer it, wait for its answer, list the open ones.

An approval runs on the shared task queue (it needs no pane) under ``approval-<id>``, the id
spelled in :mod:`agentcomms.workflow_ids`; its update and query are called by reference. Once
decided the workflow has ended, and its result is its view: an answer that comes later reads it
and is told who decided.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from agentcomms import errors, policies
from agentcomms.approval_models import ApprovalRequest, ApprovalView, Decision
from agentcomms.errors import AnswerRefused
from agentcomms.escalation_models import Escalation, RungRecord
from agentcomms.search_attributes import AGENT_ID
from agentcomms.workflow_ids import APPROVAL_WORKFLOW, approval_workflow_id
from workflows.approval.models import ApprovalInput, Decide, Decided, WaitDecided
from workflows.approval.workflow import ApprovalWorkflow

# Short enough to type from a phone ("YES K7QF"); no 0/O or 1/I to misread.
ID_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"
ID_LENGTH = 4
# How long a run outlives its timeout, for the workflow to record the timeout and end.
RUN_MARGIN_S = 60


def new_approval_id() -> str:
    return "".join(secrets.choice(ID_ALPHABET) for _ in range(ID_LENGTH))


class Approvals:
    def __init__(self, client: Client, task_queue: str) -> None:
        self._client = client
        self._task_queue = task_queue

    def handle(self, approval_id: str) -> WorkflowHandle[ApprovalWorkflow, ApprovalView]:
        return self._client.get_workflow_handle_for(
            ApprovalWorkflow.run, approval_workflow_id(approval_id)
        )

    async def open(self, request: ApprovalRequest, escalation: Escalation | None = None) -> None:
        """Start the approval (with its ladder); both must be signed already. Raises
        ``WorkflowAlreadyStartedError`` when its id is taken: pick another."""
        await self._client.start_workflow(
            ApprovalWorkflow.run,
            ApprovalInput(request=request, escalation=escalation),
            id=approval_workflow_id(request.id),
            task_queue=self._task_queue,
            # An id is a person's handle on one request: never two runs under it.
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            execution_timeout=timedelta(seconds=request.timeout_s + RUN_MARGIN_S)
            + policies.APPROVAL_LATE_ANSWERS,
            static_summary=f"agent {request.agent_id} asks to use {request.tool}",
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(AGENT_ID, request.agent_id)]
            ),
        )

    async def decide(self, decision: Decision) -> Decided | None:
        """Answer it (signed already); None when there is no such approval."""
        handle = self.handle(decision.approval_id)
        try:
            return await handle.execute_update(ApprovalWorkflow.decide, Decide(decision=decision))
        except (WorkflowUpdateFailedError, RPCError) as exc:
            cause = exc.cause if isinstance(exc, WorkflowUpdateFailedError) else None
            if isinstance(cause, ApplicationError) and cause.type == errors.NOT_SIGNED:
                raise AnswerRefused(
                    f"approval {decision.approval_id}: its worker refused the answer as not "
                    "signed by this deployment, so the gateway and the worker that runs "
                    "approvals (on the shared queue) hold different deployment keys: give both "
                    "the same security.deployment_key in each host's config"
                ) from exc
            # Its run ended (decided, or timed out) or never was: read what decided it.
            view = await self.view(decision.approval_id)
            if view is None:
                return None
            if view.decision is None:
                raise
            return Decided(accepted=False, view=view)

    async def view(self, approval_id: str) -> ApprovalView | None:
        """The approval as it stands, running or ended; None when there is none."""
        handle = self.handle(approval_id)
        try:
            return await handle.query(ApprovalWorkflow.view)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        except Exception:
            try:
                return await handle.result()
            except (WorkflowFailureError, RPCError):
                return None

    async def rungs(self, approval_id: str) -> list[RungRecord]:
        """What its escalation ladder did so far (empty without one, or with no such approval)."""
        try:
            return await self.handle(approval_id).query(ApprovalWorkflow.escalation)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return []
            raise

    async def wait(self, approval_id: str, timeout_s: float) -> ApprovalView | None:
        """The approval once decided (its run ended), or None while it is still open."""
        handle = self.handle(approval_id)
        try:
            return await handle.execute_update(
                ApprovalWorkflow.wait,
                WaitDecided(timeout_s=timeout_s),
                rpc_timeout=timedelta(seconds=timeout_s + 5),
            )
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            return None  # no worker answered in time: still open, as far as anyone knows
        except (WorkflowUpdateFailedError, RPCError):
            # Its run ended: decided long ago (or there is none).
            view = await self.view(approval_id)
            return view if view is not None and view.decision is not None else None

    async def open_ids(self) -> list[str]:
        """The ids of the approvals still waiting on this deployment's task queue, in the
        order they were asked. That is when Temporal started each: the gateway opens a tool's
        questions one after another, but their first workflow tasks (each view's `opened_at`)
        may run in either order, and the first question must be listed first."""
        query = (
            f"WorkflowType = '{APPROVAL_WORKFLOW}' AND ExecutionStatus = 'Running' "
            f"AND TaskQueue = '{self._task_queue}'"
        )
        prefix = approval_workflow_id("")
        started = [(w.start_time, w.id) async for w in self._client.list_workflows(query)]
        return [workflow_id.removeprefix(prefix) for _, workflow_id in sorted(started)]


__all__ = ["Approvals", "WorkflowAlreadyStartedError", "new_approval_id"]
