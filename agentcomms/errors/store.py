"""What can go wrong in the projection store, as errors callers can branch on."""

from __future__ import annotations

from agentcomms.errors.base import AgentcommsError


class StoreError(AgentcommsError):
    """The projection database could not do what was asked."""


class DatabaseUnavailable(StoreError):
    """The database cannot be reached or opened (wrong URL, server down, unreadable file)."""


class SchemaOutdated(StoreError):
    """The database's tables are older (or newer) than this version of agentcomms expects."""


class EventNotFound(StoreError, LookupError):
    """No event has this id (for this agent); the gateway answers -32604 "not found"."""

    def __init__(self, event_id: str, agent_id: str | None = None) -> None:
        self.event_id = event_id
        self.agent_id = agent_id
        where = f" for agent {agent_id!r}" if agent_id is not None else ""
        super().__init__(f"No event {event_id!r}{where}.")
