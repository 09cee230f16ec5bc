"""Approval requests as tests build them, without a hook or a workflow."""

from __future__ import annotations

from typing import Any

from agentcomms.approval_models import ApprovalRequest


def approval_request(**more: Any) -> ApprovalRequest:
    """A request as an agent's hook opens it (agent backend's Bash, `touch done.txt`, approval
    K7QF), with `more` fields in place of these."""
    fields: dict[str, Any] = {
        "id": "K7QF",
        "agent_id": "backend",
        "tool": "Bash",
        "input_text": "touch done.txt",
        "timeout_s": 60,
        "nonce": "n1",
    }
    return ApprovalRequest.model_validate({**fields, **more})
