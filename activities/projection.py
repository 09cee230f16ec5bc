"""Projection writes: the workflow's account of each event and agent, written to the SQL store.

Run as local activities beside the delivery, on the agent's host worker. Every write is idempotent,
so a retried activity (or a replayed workflow task) changes nothing the second time.
"""

from __future__ import annotations

from temporalio import activity

from agentcomms.models import Agent, Event
from agentcomms.store import Store


class ProjectionActivities:
    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn(name="record_event")
    async def record_event(self, event: Event) -> None:
        """Write an event as the workflow settled it (inserted when the gateway's write was lost)."""
        await self._store.settle_event(event)

    @activity.defn(name="record_agent")
    async def record_agent(self, agent: Agent) -> None:
        await self._store.upsert_agent(agent)
