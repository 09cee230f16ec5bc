"""The results of the socket methods the MCP tools read, as typed dicts: the JSON each method
returns, key by key, so that mypy checks both the method that builds a result and the tool that
reads it. Each method's declaration (its return type) names its result here."""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict

from agentcomms.bridge.screen_state import OnScreen, shown_for
from agentcomms.models import Agent, Event

# An event as the socket shows it: the Event model's fields (DESIGN.md, "Events") without its
# deployment tag, plus `timestamp`, the name existing clients read for `created_at`.
EventJson = dict[str, Any]
# An agent as `agents --json` shows it (:func:`agent_json`), and rows Temporal alone knows of
# (a broken mailbox): id, status and last_error at least.
AgentJson = dict[str, Any]


def event_json(event: Event) -> EventJson:
    # The deployment's tag is for the pane's host, not for readers.
    data = event.model_dump(mode="json", exclude={"signature"})
    data["timestamp"] = data["created_at"]  # the name existing clients read
    return data


def agent_json(a: Agent, seen: OnScreen | None = None) -> AgentJson:
    """An agent as `agents --json` shows it, from its projection row, with its state as its
    pane showed it where a look confirmed it (`seen`)."""
    state, waiting_for, confirmed_at = shown_for(a, seen)
    return {
        "id": a.id,
        "type": a.type,
        "target": a.target,
        "status": a.status,
        "pending": a.pending,
        "host": a.host,
        "last_error": a.last_error,
        "state": state,
        "waiting_for": waiting_for,
        # Since when, as its hooks said; unknown when its pane showed another state.
        "state_since": None
        if state != a.state
        else a.state_since and a.state_since.isoformat(timespec="seconds"),
        # When the state shown was last known true: its hook's time, or the pane's look.
        "confirmed_at": confirmed_at and confirmed_at.isoformat(timespec="seconds"),
    }


class Pong(TypedDict):
    pong: bool


class Status(TypedDict):
    running: bool
    started_at: str
    agents: int
    agents_online: int
    agent_states: dict[str, str]
    agents_broken: dict[str, str | None]
    hosts_down: list[dict[str, Any]]
    # Each chat provider's link: name, status (connected, connecting, reconnecting, failed,
    # disabled) and, when it has one, error.
    providers: list[dict[str, Any]]
    workers: dict[str, list[str]] | None
    host: str
    temporal: str
    database: str
    console: str | None


class Agents(TypedDict):
    agents: list[AgentJson]


class Posted(TypedDict):
    """A message taken into an agent's mailbox; with `wait`, how far it got."""

    event_id: str
    delivered: bool
    status: str
    error: NotRequired[str]
    note: NotRequired[str]


class AgentMessagePosted(Posted):
    to_agent_id: str


class Replied(TypedDict):
    """An agent's message to its human: on the terminal it is delivered once written; a chat's
    is queued, and with `wait` reported once the provider took or refused it."""

    event_id: str
    delivered: bool
    status: NotRequired[str]
    message_id: NotRequired[str]
    error: NotRequired[str]
    # An urgent message: the escalation ladder climbing until the human answers.
    escalation: NotRequired[str | None]
    note: NotRequired[str]


class Escalating(TypedDict):
    """An urgent message's ladder: its workflow id, or None and why not."""

    escalation: str | None
    note: NotRequired[str]


class Events(TypedDict):
    events: list[EventJson]
    agent_id: str


class Unread(TypedDict):
    """check_messages: the messages returned once each, oldest first."""

    messages: list[EventJson]
    agent_id: str
    has_more: bool
    last_seen_id: str | None


class Waited(TypedDict):
    agent_id: str
    unread: bool


class History(TypedDict):
    channel_id: str
    messages: list[EventJson]


class Turn(TypedDict):
    """A call placed (``wait``: its first answer) or a turn said on it: what the human answered
    and how the turn went (answered, timed-out, hung-up, no-answer, declined…). A call placed
    without waiting says only its id and that it rings."""

    call_id: str
    status: str
    turn: NotRequired[int]
    response: NotRequired[str]
    timed_out: NotRequired[bool]
    success: NotRequired[bool]
    note: NotRequired[str | None]
    wait: NotRequired[bool]


class Hung(TypedDict):
    """A call ended: how long it lasted and how it ended."""

    call_id: str
    duration_seconds: float
    status: str
    reason: str | None


class Calls(TypedDict):
    # Each call as the projection shows it (agentcomms.models.CallRecord, as JSON).
    calls: list[dict[str, Any]]
