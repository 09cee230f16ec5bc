"""Search attributes that make an agent's workflow findable in the Temporal UI.

Kept apart from ``agentcomms.temporal`` so workflow code can import them without pulling in I/O.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

AGENT_ID = SearchAttributeKey.for_keyword("AgentId")
AGENT_STATUS = SearchAttributeKey.for_keyword("AgentStatus")
# What the agent is doing, from its hooks: ready, busy, waiting, offline, unknown.
AGENT_STATE = SearchAttributeKey.for_keyword("AgentState")
ALL: tuple[SearchAttributeKey[str], ...] = (AGENT_ID, AGENT_STATUS, AGENT_STATE)
