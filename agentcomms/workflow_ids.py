"""What Temporal calls agentcomms' things: workflow ids, workflow types and task queues, spelled
once. Ids carry meaning (``agent-backend``), so a person finds a mailbox in the Temporal UI by its
agent's name; the workers, the gateway and the pane activities all read them from here.

Standard library only: workflow code and quick commands import it.
"""

from __future__ import annotations

MAILBOX_WORKFLOW = "AgentWorkflow"
OUTBOX_WORKFLOW = "OutboxWorkflow"
CALL_WORKFLOW = "CallWorkflow"
APPROVAL_WORKFLOW = "ApprovalWorkflow"
ESCALATION_WORKFLOW = "EscalationWorkflow"
_MAILBOX_PREFIX = "agent-"
_OUTBOX_PREFIX = "outbox-"
_CALL_PREFIX = "call-"
_APPROVAL_PREFIX = "approval-"
_ESCALATION_PREFIX = "escalation-"
_HOST_QUEUE_PREFIX = "agentcomms-host-"


def mailbox_id(agent_id: str) -> str:
    """The workflow id of an agent's mailbox."""
    return f"{_MAILBOX_PREFIX}{agent_id}"


def agent_of_mailbox(workflow_id: str) -> str | None:
    """The agent whose mailbox has this workflow id; None for any other workflow."""
    if not workflow_id.startswith(_MAILBOX_PREFIX) or workflow_id == _MAILBOX_PREFIX:
        return None
    return workflow_id.removeprefix(_MAILBOX_PREFIX)


def outbox_workflow_id(agent_id: str, channel_id: str) -> str:
    """The workflow id of an agent's outbox to one chat (``outbox-backend-telegram:456``)."""
    return f"{_OUTBOX_PREFIX}{agent_id}-{channel_id}"


def call_workflow_id(call_id: str) -> str:
    """The workflow id of one phone call (``call-c_01J…``)."""
    return f"{_CALL_PREFIX}{call_id}"


def approval_workflow_id(approval_id: str) -> str:
    """The workflow id of one permission request waiting for its human (``approval-K7QF``)."""
    return f"{_APPROVAL_PREFIX}{approval_id}"


def escalation_workflow_id(agent_id: str) -> str:
    """The workflow id of an agent's urgent message finding its human (``escalation-backend``):
    one at a time per agent, so a second urgent message does not ring twice."""
    return f"{_ESCALATION_PREFIX}{agent_id}"


def host_task_queue(host: str) -> str:
    """The task queue of one machine's worker: where the mailboxes of its panes run and type."""
    return f"{_HOST_QUEUE_PREFIX}{host}"


def host_of_task_queue(task_queue: str) -> str:
    """The machine a host task queue belongs to (the queue itself when it is the shared one)."""
    return task_queue.removeprefix(_HOST_QUEUE_PREFIX)
