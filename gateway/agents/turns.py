"""A process agent's turns in its events: each turn's beginning and end (with its stop reason),
as `agentcomms events` lists them and `trace` shows them beside the messages the turn carried.

The agent's host tells the gateway each turn as a pane agent's hooks tell theirs (``TurnStart``,
``TurnEnd``, through the socket's ``agent_hook``); this observer writes them to the projection
as ``system`` events of the agent, on the channel ``acp:<session id>`` (the session the turn ran
in: a ``/clear`` shows as a new one). Only a process agent's turns are written: a pane's hooks
name no such events, and one that did would write nothing.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from agentcomms.ids import new_event_id
from agentcomms.models import Event, utcnow
from agentcomms.store import PROJECTION_UNAVAILABLE, Store

log = logging.getLogger(__name__)

BEGAN, ENDED = "began", "ended"
EVENTS = {"TurnStart": BEGAN, "TurnEnd": ENDED}
# The ids of the messages a turn carried, kept in its events (a prompt holds those that waited).
IDS_KEPT = 100
# How much of the turn's reply its end shows (the whole went to the chat, or `peek`).
REPLY_CHARS = 200
# How many of an agent's events after a message `trace` reads for the turn that carried it.
LOOK_AHEAD = 200


def turn_text(which: str, payload: dict[str, Any]) -> str:
    """A turn's event as a list shows it in one line."""
    ids = _ids(payload)
    carried = f" ({len(ids)} message{'s' if len(ids) != 1 else ''})" if ids else ""
    if which == BEGAN:
        return f"turn began{carried}"
    error = payload.get("error")
    if isinstance(error, str) and error:
        return f"turn ended on an error{carried}: {error[:300]}"
    return f"turn ended: {payload.get('stop_reason') or 'end_turn'}{carried}"


class TurnLog:
    """Writes a process agent's turns as its events (an observer of the agents' hooks)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def agent_did(self, agent_id: str, event: str, payload: dict[str, Any]) -> None:
        which = EVENTS.get(event)
        if which is None:
            return
        try:
            await self._record(agent_id, which, payload)
        except PROJECTION_UNAVAILABLE as exc:  # the turn goes on; the others still hear of it
            log.warning("%s: its turn's %s not recorded: %s", agent_id, which, exc)

    async def _record(self, agent_id: str, which: str, payload: dict[str, Any]) -> None:
        agent = await self._store.get_agent(agent_id)
        if agent is None or agent.type != "process":
            return
        session = payload.get("session_id")
        kept: dict[str, Any] = {
            "turn": which,
            "event_ids": _ids(payload),
            "session_id": session if isinstance(session, str) else None,
        }
        if which == ENDED:
            reason, error = payload.get("stop_reason"), payload.get("error")
            kept["stop_reason"] = reason if isinstance(reason, str) else None
            kept["error"] = error[:1000] if isinstance(error, str) and error else None
            reply = payload.get("reply")
            if isinstance(reply, str) and reply.strip():
                kept["reply"] = " ".join(reply.split())[:REPLY_CHARS]
        kept["text"] = turn_text(which, kept)
        now = utcnow()
        await self._store.record_event(
            Event(
                id=new_event_id(),
                agent_id=agent_id,
                channel_id=f"acp:{kept['session_id'] or 'unknown'}",
                type="system",
                role="agent",
                status="delivered",
                payload=kept,
                created_at=now,
                delivered_at=now,
            )
        )


def is_turn(event: Event) -> bool:
    return event.type == "system" and event.payload.get("turn") in (BEGAN, ENDED)


async def turn_steps(store: Store, event: Event) -> list[dict[str, Any]]:
    """`trace`'s steps for the turn that carried a message prompted to a process agent: when
    it began and how it ended; none while no turn carried it (or for a pane agent)."""
    later = await store.events_after(event.agent_id, event.id, LOOK_AHEAD)
    turns = [e for e in later if is_turn(e) and event.id in _ids(e.payload)]
    return [_step(e) for e in turns[:2]]


async def traced_turn(store: Store, event: Event) -> list[dict[str, Any]]:
    """`trace` of a turn's own event: the messages it carried, its beginning and its end."""
    ids = _ids(event.payload)
    carried = await store.events_by_id(event.agent_id, ids) if ids else {}
    steps = []
    for event_id in ids:
        message = carried.get(event_id)
        said = f": {' '.join(message.text.split())[:80]}" if message is not None else ""
        steps.append(_at(message.created_at if message else None, "carried", event_id + said))
    both = [event]
    if ids and ids[0] in carried:
        later = await store.events_after(event.agent_id, ids[0], LOOK_AHEAD)
        both = [e for e in later if is_turn(e) and _ids(e.payload) == ids][:2] or both
    return steps + [_step(e) for e in both]


def _step(turn: Event) -> dict[str, Any]:
    session = turn.payload.get("session_id") or "unknown"
    if turn.payload.get("turn") == BEGAN:
        return _at(turn.created_at, "turn began", f"prompted in session {session}")
    detail = turn_text(ENDED, turn.payload).removeprefix("turn ended")
    return _at(turn.created_at, "turn ended", detail.lstrip(": ") or "end_turn")


def _at(when: datetime | None, step: str, detail: str) -> dict[str, Any]:
    return {"at": when.isoformat() if when else None, "step": step, "detail": detail}


def _ids(payload: dict[str, Any]) -> list[str]:
    ids = payload.get("event_ids")
    if not isinstance(ids, list):
        return []
    return [i for i in ids if isinstance(i, str)][:IDS_KEPT]
