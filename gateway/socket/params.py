"""The parameters of each socket method, as pydantic models: a wrong type or a missing field is an
`invalid params` error that names it."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from agentcomms.bridge.fields import InterruptKey, TmuxSocket, TmuxTarget
from agentcomms.framing import strip_unsafe
from agentcomms.ids import check_agent_id, is_event_id
from agentcomms.models import MAX_MESSAGE_CHARS, DeliverMode

AgentId = Annotated[
    str,
    AfterValidator(check_agent_id),
    Field(description="letters, digits, '.', '_' or '-'; at most 64"),
]


def _has_words(value: str) -> str:
    # Spaces and control characters alone would be typed as a bare header and submitted: the
    # agent would spend a turn on nothing (and a chat or a call would carry nothing).
    if not strip_unsafe(value).strip():
        raise ValueError("the message is empty (nothing but spaces or control characters)")
    return value


MessageText = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_MESSAGE_CHARS),
    AfterValidator(_has_words),
]
WaitSeconds = Annotated[float, Field(gt=0, le=300)]
# A path as an agent names a file of its folder (absolute, or relative to that folder).
FilePath = Annotated[str, StringConstraints(min_length=1, max_length=4096)]


def _event_id(value: str) -> str:
    if not is_event_id(value):
        raise ValueError(
            "expected evt_ and a ULID (26 characters: digits and capitals but I, L, O, U), like "
            "evt_01J…; `agentcomms send --help` shows how to make one in a shell"
        )
    return value


ClientEventId = Annotated[str, AfterValidator(_event_id)]


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoParams(Params):
    pass


class SendParams(Params):
    agent_id: AgentId
    message: MessageText
    wait: bool = False
    timeout: WaitSeconds = 10
    event_id: ClientEventId | None = Field(
        default=None, description="retry-safe: the same id is typed once"
    )


class InterruptParams(Params):
    agent_id: AgentId
    reason: str | None = None
    wait: bool = False
    timeout: WaitSeconds = 10


class EventsParams(Params):
    agent_id: AgentId
    limit: Annotated[int, Field(ge=1, le=1000)] = 50
    since: str | None = Field(default=None, description="only events after this id")
    tail: bool = Field(default=False, description="without since: the latest `limit` events")
    rejected: bool = Field(
        default=True, description="include messages the allowlist refused (kept for audit)"
    )


class ReplyParams(Params):
    channel_id: Annotated[str, StringConstraints(min_length=3, max_length=200)]
    message: MessageText
    agent_id: AgentId | None = None
    reply_to: str | None = Field(default=None, description="the message id this answers")
    files: Annotated[list[FilePath], Field(max_length=10)] = Field(
        default_factory=list,
        description="files sent after the message, each a path in the agent's own folder",
    )
    wait: bool = Field(default=True, description="chat channels: return once the provider took it")
    urgent: bool = Field(
        default=False,
        description="climb the agent's escalation ladder (SMS, call) until the human answers",
    )
    timeout: WaitSeconds = 10


class AgentMessageParams(Params):
    from_agent_id: AgentId
    to_agent_id: AgentId
    message: MessageText
    wait: bool = False
    timeout: WaitSeconds = 10


class RegisterParams(Params):
    agent_id: AgentId
    target: TmuxTarget
    type: str = "tmux"
    socket: TmuxSocket | None = None
    host: str | None = None
    interrupt_key: InterruptKey = "C-c"
    submit_delay_ms: Annotated[int, Field(ge=0, le=10_000)] = 150
    max_chars: Annotated[int, Field(ge=100, le=MAX_MESSAGE_CHARS)] = Field(
        default=MAX_MESSAGE_CHARS, description="longest text typed; longer text is cut, visibly"
    )
    deliver: DeliverMode = Field(
        default="when-ready", description="when-ready: only when the agent is at its prompt"
    )


class UnregisterParams(Params):
    agent_id: AgentId


class InboxParams(Params):
    limit: Annotated[int, Field(ge=1, le=1000)] = 20
    since: str | None = Field(default=None, description="only messages after this event id")


class PairParams(Params):
    code: Annotated[str, StringConstraints(min_length=4, max_length=32)]
    confirm: bool = Field(
        default=False,
        description="admit the sender; without it, only who the code would admit is shown",
    )


class RevokeSenderParams(Params):
    provider: Annotated[str, StringConstraints(min_length=1, max_length=32)]
    sender_id: Annotated[str, StringConstraints(min_length=1, max_length=255)]


class AgentsParams(Params):
    include_offline: bool = True


# ---- params of the methods the MCP tools need ------------------------------------------------------


class CheckMessagesParams(Params):
    agent_id: AgentId
    limit: Annotated[int, Field(ge=1, le=100)] = 10


class WaitMessagesParams(Params):
    agent_id: AgentId
    timeout: WaitSeconds = 30


class HistoryParams(Params):
    channel_id: Annotated[str, StringConstraints(min_length=3, max_length=200)]
    limit: Annotated[int, Field(ge=1, le=1000)] = 10
    agent_id: AgentId | None = None  # only this agent's messages in and out of the channel


class TraceParams(Params):
    event_id: Annotated[str, StringConstraints(min_length=1, max_length=64)]
