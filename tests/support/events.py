"""Events as the projection stores them, made up for a test and recorded straight into a store."""

from __future__ import annotations

from typing import Any

from agentcomms.ids import new_event_id
from agentcomms.models import Event
from agentcomms.store import Store


def message(
    agent_id: str = "backend",
    channel_id: str = "telegram:42",
    text: str = "hello",
    **fields: Any,
) -> Event:
    """A human's message to `agent_id` on `channel_id`, as the gateway records one; `fields`
    set or override any other field."""
    defaults: dict[str, Any] = {
        "id": new_event_id(),
        "type": "human_message",
        "role": "human",
        "direction": "in",
    }
    return Event(
        agent_id=agent_id,
        channel_id=channel_id,
        payload={"text": text},
        **{**defaults, **fields},
    )


async def record_all(store: Store, *events: Event) -> list[Event]:
    """`events` recorded in order, each one new to the store."""
    for event in events:
        assert await store.record_event(event)
    return list(events)
