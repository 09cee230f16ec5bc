"""Projection writes: the workflow's account of each event and agent, written to the SQL store.

Run as local activities beside the delivery, on the agent's host worker. Every write is idempotent,
so a retried activity (or a replayed workflow task) changes nothing the second time.
"""

from __future__ import annotations

from temporalio import activity

from agentcomms.models import ProjectionUpdate
from agentcomms.store import Store


class ProjectionActivities:
    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn(name="record_projection")
    async def record_projection(self, update: ProjectionUpdate) -> None:
        """Write the events a mailbox settled (inserted when the gateway's write was lost) and
        its agent row: one local activity per batch instead of one per message."""
        await self._store.settle_events(update.events)
        if update.agent is not None:
            await self._store.upsert_agent(update.agent)
