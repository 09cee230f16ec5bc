"""Projection writes: the workflows' account of each event and agent, written to the SQL store.

Run as local activities beside the delivery, on the agent's host worker. Every write is idempotent,
so a retried activity (or a replayed workflow task) changes nothing the second time.

People and agents read what is written here (`events`, `check_messages`), and Temporal
authenticates no one, so the writes run only as local activities of agentcomms' own workflows;
and what a mailbox writes of its messages must be what the deployment signed for its agent: any
other message (a forgery its state or a signal carried in, one signed for another agent) is
written only as rejected. What an outbox writes must be an outbound message the deployment signed
for that outbox: any other (a forged item signalled to an outbox) is not written at all, so it
never shows as someone's message. An agent's row is written by that agent's own mailbox alone.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.delivery import ASK_THE_PROJECTION_AFTER
from agentcomms import errors, metrics
from agentcomms.models import (
    Event,
    LoadedEvents,
    LoadRequest,
    ProjectionUpdate,
    Recalled,
    RecallRequest,
    utcnow,
)
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from agentcomms.workflow_ids import (
    MAILBOX_WORKFLOW,
    OUTBOX_WORKFLOW,
    agent_of_mailbox,
    outbox_workflow_id,
)

# A mailbox started afresh remembers the messages typed within this while as seen; an older copy
# signalled again is caught where it would be typed, which asks the projection about old events.
RECALL_TYPED_WITHIN = 2 * ASK_THE_PROJECTION_AFTER
RECALL_TYPED_MOST = 2000


class ProjectionActivities:
    def __init__(self, store: Store, key: DeploymentKey) -> None:
        self._store = store
        self._key = key

    @activity.defn(name="record_projection")
    async def record_projection(self, update: ProjectionUpdate) -> None:
        """Write the events a workflow settled (inserted when the gateway's write was lost) and
        its agent row: one local activity per batch instead of one per message. Waiting texts
        are inserted where the projection lacks them (a mailbox about to let go of them)."""
        info = _local_only()
        waiting, events, agent = update.waiting, update.events, update.agent
        mailbox_of = None
        if info.workflow_type == MAILBOX_WORKFLOW:
            mailbox_of = agent_of_mailbox(info.workflow_id or "")
            waiting = [as_mailbox_writes(self._key, e, mailbox_of) for e in waiting]
            events = [as_mailbox_writes(self._key, e, mailbox_of) for e in events]
        elif info.workflow_type == OUTBOX_WORKFLOW:
            events = [e for e in events if self._sent_by(e, info.workflow_id or "")]
        if agent is not None and (mailbox_of is None or agent.id != mailbox_of):
            # An agent's row (its pane, the newest registration's time that a mailbox started
            # afresh recalls) is its own mailbox's alone: a mailbox anyone started for it under
            # another id would otherwise make it forget which registration is the newest.
            activity.logger.warning(
                "did not write %s's agent row for %s (%s): only the agent's own mailbox writes it",
                agent.id,
                info.workflow_id,
                info.workflow_type,
            )
            agent = None
        await self._store.record_events(waiting)
        await self._store.settle_events(events, agent=agent)
        metrics.settled(events, agent)

    def _sent_by(self, event: Event, outbox_id: str) -> bool:
        if outbox_may_write(self._key, event, outbox_id):
            return True
        activity.logger.warning(
            "did not write %s for %s: not signed by this deployment", event.id, outbox_id
        )
        return False

    @activity.defn(name="load_waiting_events")
    async def load_waiting_events(self, request: LoadRequest) -> LoadedEvents:
        """Read waiting events back, in the order asked, until about `max_chars` of text (at
        least one): the mailbox carries their ids, the projection their texts."""
        _local_only()
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

    @activity.defn(name="recall_mailbox")
    async def recall_mailbox(self, request: RecallRequest) -> Recalled:
        """What the agent's earlier runs obeyed and typed, for a mailbox started afresh (its
        workflow terminated and started again): the newest registration's time, and the ids
        of the messages typed lately."""
        _local_only()
        since = utcnow() - RECALL_TYPED_WITHIN
        return Recalled(
            pane_changed_at=await self._store.pane_changed_at(request.agent_id),
            typed_ids=await self._store.typed_since(request.agent_id, since, RECALL_TYPED_MOST),
        )


def as_mailbox_writes(key: DeploymentKey, event: Event, agent_id: str | None) -> Event:
    """The event as a mailbox may write it: as it is when the deployment signed it for this
    mailbox's agent, otherwise as a refused forgery (which no agent reads)."""
    genuine = event.agent_id == agent_id and key.event_is_genuine(event)
    if event.direction == "in" and genuine:
        return event
    error = event.error if event.status in ("failed", "rejected") else errors.NOT_SIGNED_SENTENCE
    return event.model_copy(update={"status": "rejected", "error": error, "delivered_at": None})


def outbox_may_write(key: DeploymentKey, event: Event, outbox_id: str) -> bool:
    """Whether an outbox may write this event: an outbound message the deployment signed
    for this outbox's agent and chat (its tag predates the provider's message id)."""
    asked = event.model_copy(
        update={"payload": {k: v for k, v in event.payload.items() if k != "message_id"}}
    )
    return (
        event.direction == "out"
        and outbox_workflow_id(event.agent_id, event.channel_id) == outbox_id
        and key.event_is_genuine(asked)
    )


def _local_only() -> activity.Info:
    info = activity.info()
    if not info.is_local:
        activity.logger.warning(
            "refused %s scheduled by %s (%s): it runs only inside agentcomms' own workflows",
            info.activity_type,
            info.workflow_id,
            info.workflow_type,
        )
        raise ApplicationError(
            f"{info.activity_type} runs only as a local activity of agentcomms' own workflows",
            type=errors.NOT_LOCAL,
            non_retryable=True,
        )
    return info
