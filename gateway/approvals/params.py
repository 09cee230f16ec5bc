"""What the approvals' socket methods take: a hook's request and wait, the human's answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from agentcomms.bridge.fields import TmuxSocket
from gateway.agents.hooks import PaneId
from gateway.socket.params import AgentId, Params

ApprovalId = Annotated[str, StringConstraints(pattern=r"^[2-9A-Za-z]{4}$")]


class ApprovalOpenParams(Params):
    # acp: a process agent's permission request, asked by its host's worker with its options.
    kind: Literal["claude-code", "codex", "gemini", "acp"]
    agent_id: AgentId | None = None
    pane: PaneId | None = None
    tmux_socket: TmuxSocket | None = None
    tool_name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    tool_input: dict[str, Any] = Field(default_factory=dict)
    permission_suggestions: list[dict[str, Any]] = Field(default_factory=list, max_length=20)
    options: list[Annotated[str, StringConstraints(min_length=1, max_length=200)]] = Field(
        default_factory=list,
        max_length=10,
        description="a process agent's own answers (allow once, reject…): the human picks one",
    )


class ApprovalWaitParams(Params):
    id: ApprovalId
    wait_s: Annotated[float, Field(gt=0, le=120)] = 25
    # Set by the gateway for a hook in an agent's pane: it waits only on that agent's requests.
    agent_id: AgentId | None = None


class ApprovalDecideParams(Params):
    id: ApprovalId
    behavior: Literal["allow", "allow_session", "deny", "terminal", "answer"]
    message: Annotated[str, StringConstraints(max_length=2_000)] | None = None
    # A question's answer: an option's label or number (several, comma-separated), or words.
    answer: Annotated[str, StringConstraints(min_length=1, max_length=2_000)] | None = None
    # Accepted from older clients and ignored: who answered is read from the connection.
    by: Annotated[str, StringConstraints(max_length=100)] | None = None
    via: Literal["cli", "terminal"] = "cli"
    # Set by the gateway for a hook in an agent's pane: it closes only that agent's requests.
    agent_id: AgentId | None = None


class ApprovalsListParams(Params):
    pass
