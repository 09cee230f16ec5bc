"""Projection writes: the workflow's account of each event and agent, written to the SQL store.

Run as local activities beside the delivery, on the agent's host worker. Every write is idempotent,
so a retried activity (or a replayed workflow task) changes nothing the second time.
"""

from __future__ import annotations

from temporalio import activity

from agentcomms import metrics
from agentcomms.models import LoadedEvents, LoadRequest, ProjectionUpdate
from agentcomms.store import Store


class ProjectionActivities:
    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn(name="record_projection")
    async def record_projection(self, update: ProjectionUpdate) -> None:
        """Write the events a mailbox settled (inserted when the gateway's write was lost) and
        its agent row: one local activity per batch instead of one per message. Waiting texts
        are inserted where the projection lacks them (a mailbox about to let go of them)."""
        await self._store.record_events(update.waiting)
        await self._store.settle_events(update.events, agent=update.agent)
        metrics.settled(update.events, update.agent)

    @activity.defn(name="load_waiting_events")
    async def load_waiting_events(self, request: LoadRequest) -> LoadedEvents:
        """Read waiting events back, in the order asked, until about `max_chars` of text (at
        least one): the mailbox carries their ids, the projection their texts."""
        found = await self._store.events_by_id(request.agent_id, request.event_ids)
        loaded = LoadedEvents()
        chars = 0
        for event_id in request.event_ids:
            event = found.get(event_id)
            if event is None:
                continue
            if loaded.events and chars + len(event.text) > request.max_chars:
                break
            loaded.events.append(event)
            chars += len(event.text)
        return loaded
