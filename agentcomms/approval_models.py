"""What an approval holds and how it was answered: the gateway, the workflow and the deployment key
(:mod:`agentcomms.trust`) share these, so they live in the core and pass through the sandbox."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

# allow: this once; allow_session: and what the agent offered for the rest of its session;
# deny: with the human's message to the model; terminal: answered in the agent's own dialog;
# timeout: no answer in time (then the request's on_timeout says what the hook does).
Behavior = Literal["allow", "allow_session", "deny", "terminal", "timeout"]
OnTimeout = Literal["terminal", "deny"]


class ApprovalRequest(BaseModel):
    """One permission request of an agent, as the gateway opened it (and signed it)."""

    id: str  # short, for a person to type: K7QF
    agent_id: str
    kind: str = "claude-code"
    tool: str
    # The tool's input as the agent sent it, made safe to show and with secrets masked.
    input_text: str
    # What the agent offered for "allow for this session" (Claude's permission_suggestions).
    suggestions: list[dict[str, Any]] = Field(default_factory=list)
    timeout_s: float
    on_timeout: OnTimeout = "terminal"
    signature: str | None = None


class Decision(BaseModel):
    """One answer to an approval: what, by whom, through what surface (signed by the gateway)."""

    approval_id: str
    behavior: Behavior
    message: str | None = None  # a denial's reason, which the model reads word for word
    by: str  # who answered: the terminal's user, "the terminal", "agentcomms"
    via: str  # where: "cli", "terminal", "timeout"
    at: datetime | None = None  # set by the workflow when it took the answer
    signature: str | None = None


class ApprovalView(BaseModel):
    """An approval as everyone reads it: the request, its answer once there is one, and every
    answer tried (the later ones were told it was decided already)."""

    request: ApprovalRequest
    opened_at: datetime
    decision: Decision | None = None
    history: list[Decision] = Field(default_factory=list)

    @property
    def open(self) -> bool:
        return self.decision is None
