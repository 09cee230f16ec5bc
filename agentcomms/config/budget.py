"""The ``budget`` section: what one agent may spend of the human's attention and money in an
hour (calls placed, texts sent, escalation ladders climbed). An agent can be prompt-injected or
stuck in a loop, and each of these rings a phone or is billed; past its budget a request is
refused with the reason. ``agents.ID.budget`` replaces it for one agent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from agentcomms.config.section import Section

if TYPE_CHECKING:
    from agentcomms.config.models import Config

Spending = Literal["calls", "texts", "ladders"]


class Budget(Section):
    calls: int = Field(
        default=10,
        ge=0,
        description="calls an agent may place in an hour (initiate_call, agentcomms call); 0: none",
    )
    texts: int = Field(
        default=30,
        ge=0,
        description="SMS and WhatsApp messages an agent may send in an hour; 0: none",
    )
    ladders: int = Field(
        default=10,
        ge=0,
        description="escalation ladders that text or call (an urgent message's, a request's) an "
        "agent may start in an hour; past it, a request still reaches the chats and the "
        "terminal; 0: none",
    )


def budget_for(cfg: Config, agent_id: str) -> tuple[Budget, str]:
    """The agent's budget, and the key that sets it (for the refusal to name)."""
    agent = cfg.agents.get(agent_id)
    if agent is not None and agent.budget is not None:
        return agent.budget, f"agents.{agent_id}.budget"
    return cfg.budget, "budget"
