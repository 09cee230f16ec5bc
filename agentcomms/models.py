"""Pass-through data models shared by workflows, activities, the store and the gateway.

Workflows import this module, so it holds only pydantic models and the standard library: no I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from agentcomms import limits

EventType = Literal["human_message", "agent_message", "interrupt", "system"]
Role = Literal["human", "agent", "system"]
# "rejected": refused for good and never typed (the allowlist, no deployment signature, a voice
# note nobody could transcribe, a full mailbox); the event's error says which.
EventStatus = Literal["new", "delivered", "failed", "rejected"]
# "in": to the agent (typed into its pane); "out": from the agent to a human channel.
Direction = Literal["in", "out"]
AgentStatus = Literal["online", "offline", "unreachable"]
# A pane agent is typed into; a process agent is started by agentcomms and prompted over ACP.
AgentType = Literal["tmux", "process"]

LOCAL_CHANNEL = "cli:local"
MAX_MESSAGE_CHARS = limits.MAX_MESSAGE_CHARS


def utcnow() -> datetime:
    return datetime.now(UTC)


# The failed attempts kept per message, latest last (`trace` shows them; the count of all attempts
# is kept beside them): of typing it into its pane, or of sending it to a chat.
TRIES_KEPT = 10


class Try(BaseModel):
    """One failed attempt to type a message into its pane: when, and what went wrong."""

    at: datetime
    error: str


class Event(BaseModel):
    """One message or happening in an agent's life; the projection stores these rows."""

    id: str
    agent_id: str
    channel_id: str
    type: EventType
    role: Role
    direction: Direction = "in"
    source_agent_id: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    status: EventStatus = "new"
    attempts: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    delivered_at: datetime | None = None
    error: str | None = None
    # What typing changed, e.g. that the agent's max_chars cut the text.
    note: str | None = None
    # The latest failed attempts before it was typed or given up on (the pane was missing…).
    tries: list[Try] = Field(default_factory=list)
    # The deployment's tag over what the event says (agentcomms.trust): the pane's host types
    # only events it can verify, since anyone who reaches Temporal can signal a mailbox.
    signature: str | None = None

    @field_validator("tries", mode="before")
    @classmethod
    def _no_tries_recorded(cls, value: Any) -> Any:
        return [] if value is None else value  # rows written before tries were kept

    @property
    def text(self) -> str:
        return str(self.payload.get("text", ""))


class Agent(BaseModel):
    """An agent as the projection knows it (the workflow holds the authoritative state)."""

    id: str
    type: AgentType = "tmux"
    target: str | None = None
    tmux_socket: str | None = None
    host: str | None = None
    interrupt_key: str = "C-c"
    submit_delay_ms: int = 150
    status: AgentStatus = "offline"
    pending: int = 0
    last_delivered_event_id: str | None = None
    last_error: str | None = None
    updated_at: datetime = Field(default_factory=utcnow)
    # What the agent is doing, from its hooks (agentcomms.agents.state): ready, busy, waiting
    # (for what), offline, or unknown when no hook has spoken.
    state: str = "unknown"
    waiting_for: str | None = None
    state_since: datetime | None = None
    # When the newest registration or unregister its mailbox obeyed was made.
    pane_changed_at: datetime | None = None


class Channel(BaseModel):
    """A mapping from a channel (``telegram:42``, ``cli:local``…) to the agent it talks to."""

    channel_id: str
    agent_id: str | None = None
    provider: str


CallStatus = Literal[
    "dialing",  # synthesizing the first words, placing the call
    "ringing",
    "in-progress",
    "completed",  # answered, then hung up by either side
    "no-answer",
    "declined",
    "busy",
    "voicemail",  # an answering machine took the message
    "canceled",  # withdrawn while it rang: what it was about was answered elsewhere
    "failed",
]
ACTIVE_STATUSES: tuple[CallStatus, ...] = ("dialing", "ringing", "in-progress")


class CallRecord(BaseModel):
    """A call as the projection shows it (`agentcomms calls`); the workflow is the truth."""

    id: str
    agent_id: str
    status: CallStatus
    direction: Literal["out", "in"] = "out"
    phone_number: str | None = None  # "local" for the local phone
    started_at: datetime
    ended_at: datetime | None = None
    duration_seconds: float | None = None
    transcript_ref: str | None = None
    error: str | None = None


class PaneTarget(BaseModel):
    """Where an agent's text goes: a tmux pane on a tmux server on a host."""

    target: str  # session:window.pane, or a pane id like %3
    socket: str | None = None  # tmux -S path; None means the default server


PaneLook = Literal["none", "dialogs", "idle", "alive", "ready"]
DeliverMode = Literal["when-ready", "now"]


class Registration(BaseModel):
    """Where and how an agent is reached."""

    type: AgentType = "tmux"
    target: str  # a pane; for a process agent, what `agents` shows of its command
    socket: str | None = None
    host: str
    interrupt_key: str = "C-c"
    submit_delay_ms: int = 150
    max_chars: int = MAX_MESSAGE_CHARS
    # Fresh for each registration, and when the deployment made it: the mailbox obeys only the
    # newest, so a genuine registration copied from a history and signalled again later points
    # nothing back at a pane the agent has left.
    id: str = ""
    registered_at: datetime | None = None
    # The deployment's tag over the fields above and the agent's id (agentcomms.trust): a
    # registration signalled by anyone else never makes a pane type.
    signature: str | None = None
    # Type only once the agent is ready (its hooks and its pane say so), or whenever its pane
    # shows no dialog. Outside the tag: it only chooses when the pane's own look is taken.
    deliver: DeliverMode = "when-ready"
    # A process agent's: the command that starts it (an ACP agent on its stdio), its folder, and
    # whether it may start a new session when the kept one cannot be loaded. In the tag: they
    # say what runs on the host.
    command: list[str] = Field(default_factory=list)
    cwd: str | None = None
    new_session_if_lost: bool = True


class Unregister(BaseModel):
    """Take an agent's pane away: its messages wait until it is registered again."""

    # Fresh for each request, and the time it was made: the mailbox obeys it only when it is
    # newer than the registration it would end (and any unregister obeyed before).
    id: str = ""
    requested_at: datetime | None = None
    # The deployment's tag over the fields above and the agent's id (agentcomms.trust): an
    # unregister signalled by anyone else is ignored.
    signature: str | None = None


class Typing(BaseModel):
    """Type one text into a pane and submit it, at most once per event id: what the bridge is
    asked, once the host has derived every field from what it verified."""

    pane: PaneTarget
    event_id: str
    text: str
    submit_delay_ms: int = 150
    max_chars: int = MAX_MESSAGE_CHARS
    # How the pane must look for the text to be typed, checked by tmux in the same command
    # stretch as the typing: "none" types whatever it shows; "dialogs" not into a dialog or copy
    # mode; "idle" nor while a turn runs; "alive" nor when a shell is left with no program under
    # it (the agent crashed to its shell); "ready" nor whenever a shell is in the foreground.
    look: PaneLook = "none"
    # Events typed together in this one text (several waiting messages as one prompt): recorded
    # with `event_id`, and none of them typed again.
    also_ids: list[str] = Field(default_factory=list)


class Keypress(BaseModel):
    """Press a pane's interrupt key, at most once per event id."""

    pane: PaneTarget
    event_id: str
    key: str = "C-c"


class DeliverRequest(BaseModel):
    """What a mailbox asks its pane's host to type: signed messages, oldest first, and the
    signed registration of the pane. The host checks both against the deployment key and derives
    all it types (the text, the pane, the event id, the cap, the submit delay) from them."""

    registration: Registration
    events: list[Event]
    # The events as the projection is to show them once typed (the time and the note are filled
    # in where they are typed), in the same order: the delivery records itself, and the mailbox
    # makes no write of its own. Empty: the mailbox records them.
    settled: list[Event] = Field(default_factory=list)
    # How the pane must look to be typed into (see Typing.look), and whether the messages go as
    # one prompt, each with its header: the mailbox's choice from the agent's state.
    look: PaneLook = "none"
    together: bool = False
    # How long to wait once typed and recorded before answering, which keeps the mailbox's
    # workflow task open for the messages of a burst still coming (workflows.mailbox.queue).
    hold_ms: int = Field(default=0, ge=0, le=1000)


class DeliveryOutcome(BaseModel):
    event_id: str
    typed: bool  # False when the pane shows it was already typed by an earlier attempt
    # Why it was not typed and never will be (in a batch, where one refusal must not stop the
    # others): not signed by the deployment.
    rejected: str | None = None
    truncated: bool = False
    chars: int = 0  # characters typed (after sanitizing and the cap)
    removed: int = 0  # characters the cap cut
    recorded: bool = False  # the request's settled event is in the projection

    def cut_note(self, max_chars: int) -> str | None:
        """What a person reading the event is told when the agent's max_chars cut the text."""
        if not self.truncated:
            return None
        return (
            f"cut at the agent's max_chars ({max_chars:,}): "
            f"{self.removed:,} characters were not typed"
        )


class InterruptRequest(BaseModel):
    """Press the interrupt key of the pane the signed registration names, for a signed event."""

    registration: Registration
    event: Event


class FollowUpRequest(BaseModel):
    """Look at the input box of the pane the signed registration names, for a prompt typed there
    that no UserPromptSubmit carried; with `press`, press Enter once more if it is still there."""

    registration: Registration
    event_ids: list[str]  # the prompt's messages: the pane's record must show them typed
    needle: str  # the start of the first one's text, as the input box would show it
    press: bool = True


class FollowUpLook(BaseModel):
    in_box: bool  # the text is still in the agent's input box
    pressed: bool = False  # Enter was pressed once more (never twice for one message)


class ProjectionUpdate(BaseModel):
    """What a mailbox writes to the projection in one go: settled events and its agent row, or
    the texts of waiting events it is about to stop carrying (inserted where absent)."""

    events: list[Event] = Field(default_factory=list)
    agent: Agent | None = None
    waiting: list[Event] = Field(default_factory=list)


class LoadRequest(BaseModel):
    """Read waiting events back from the projection, in order, up to about `max_chars` of text."""

    agent_id: str
    event_ids: list[str]
    max_chars: int


class LoadedEvents(BaseModel):
    events: list[Event] = Field(default_factory=list)


class RecallRequest(BaseModel):
    agent_id: str


class Recalled(BaseModel):
    """What a mailbox started afresh learns from the projection about the agent's earlier runs:
    the newest registration's time, and the messages typed lately (older ones the delivery asks
    the projection about itself)."""

    pane_changed_at: datetime | None = None
    typed_ids: list[str] = Field(default_factory=list)
