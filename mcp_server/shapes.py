"""The tools' results: the shapes existing clients read (kept exactly, extended only by extra keys), and the
conversions from the gateway's event JSON into them."""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict

from agentcomms.errors.mcp import InvalidArgument
from agentcomms.models import LOCAL_CHANNEL
from agentcomms.transports import ProviderName, abilities

Provider = ProviderName
LOCAL_CHAT = "local"


class InboxMessage(TypedDict):
    id: str
    channel_id: str
    provider: str
    text: str
    timestamp: str
    type: str
    # Added: enough to answer (send_message(provider, chat_id) or send_agent_message).
    chat_id: str
    sender_id: str
    sender_name: str
    from_agent_id: str | None
    # Present, and true, for a voice note: the text is what a recognizer heard.
    transcribed: NotRequired[bool]


class CheckMessagesResult(TypedDict):
    messages: list[InboxMessage]
    agent_id: str
    has_more: bool
    last_seen_id: str | None


class WaitForMessagesResult(CheckMessagesResult):
    timed_out: bool


class AgentEventsResult(TypedDict):
    events: list[dict[str, Any]]
    agent_id: str


class DaemonStatus(TypedDict):
    running: bool
    started_at: NotRequired[str]
    agents: NotRequired[int]
    agents_online: NotRequired[int]
    providers: NotRequired[list[dict[str, str]]]
    host: NotRequired[str]
    agent_id: NotRequired[str]
    socket: NotRequired[str]
    message: NotRequired[str]


class AgentInfo(TypedDict):
    id: str
    type: str
    status: str
    target: str | None
    pending: int
    host: str | None
    # What the agent is doing, from its hooks: ready, busy, waiting, offline, unknown (no hooks).
    state: str
    waiting_for: str | None
    state_since: str | None


class AgentsResult(TypedDict):
    agents: list[AgentInfo]


class SendAgentMessageResult(TypedDict):
    event_id: str
    delivered: bool
    to_agent_id: str
    from_agent_id: str
    status: str


class SendMessageResult(TypedDict):
    success: bool
    message_id: str
    channel_id: str
    status: NotRequired[str]
    error: NotRequired[str]


class ChannelStatus(TypedDict):
    provider_name: str
    status: str  # connected, connecting, reconnecting, failed, disabled
    error: NotRequired[str]  # why it is reconnecting or failed


class ChannelsResult(TypedDict):
    channels: list[ChannelStatus]


class HistoryMessage(TypedDict):
    id: str
    sender_id: str
    sender_name: str
    content: str
    timestamp: str
    direction: str


class MessagesResult(TypedDict):
    messages: list[HistoryMessage]
    channel_id: str


def channel_for(provider: Provider, chat_id: str) -> str:
    """The channel id of a provider's chat: ``telegram:42``; the local console is ``cli:local``."""
    if not abilities(provider).elsewhere:
        if chat_id != LOCAL_CHAT:
            raise InvalidArgument(
                f"chat_id: the local provider has one chat, {LOCAL_CHAT!r} (not {chat_id!r})"
            )
        return LOCAL_CHANNEL
    return f"{provider}:{chat_id}"


def provider_and_chat(channel_id: str) -> tuple[str, str]:
    """The inverse of :func:`channel_for`; ``agent:<id>`` gives ``("agent", id)``."""
    if channel_id == LOCAL_CHANNEL:
        return "local", LOCAL_CHAT
    provider, _, chat = channel_id.partition(":")
    return provider, chat


def _sender(event: dict[str, Any]) -> tuple[str, str]:
    payload = event.get("payload") or {}
    if event.get("direction") == "out":
        sender = event.get("source_agent_id") or event["agent_id"]
    else:
        sender = payload.get("sender_id") or event.get("source_agent_id") or event["role"]
    return str(sender), str(payload.get("sender_name") or sender)


def _words(event: dict[str, Any]) -> str:
    """What the person wrote (the sender and channel are fields of their own here)."""
    return str((event.get("payload") or {}).get("text", ""))


def inbox_message(event: dict[str, Any]) -> InboxMessage:
    provider, chat = provider_and_chat(event["channel_id"])
    sender_id, sender_name = _sender(event)
    message: InboxMessage = {
        "id": event["id"],
        "channel_id": event["channel_id"],
        "provider": provider,
        "text": _words(event),
        "timestamp": event["timestamp"],
        "type": event["type"],
        "chat_id": chat,
        "sender_id": sender_id,
        "sender_name": sender_name,
        "from_agent_id": event.get("source_agent_id"),
    }
    if (event.get("payload") or {}).get("transcribed"):
        message["transcribed"] = True
    return message


def history_message(event: dict[str, Any]) -> HistoryMessage:
    sender_id, sender_name = _sender(event)
    return {
        "id": event["id"],
        "sender_id": sender_id,
        "sender_name": sender_name,
        "content": _words(event),
        "timestamp": event["timestamp"],
        "direction": event.get("direction", "in"),
    }


def agent_info(agent: dict[str, Any]) -> AgentInfo:
    return {
        "id": agent["id"],
        "type": agent["type"],
        "status": agent["status"],
        "target": agent.get("target"),
        "pending": agent.get("pending", 0),
        "host": agent.get("host"),
        "state": agent.get("state") or "unknown",
        "waiting_for": agent.get("waiting_for"),
        "state_since": agent.get("state_since"),
    }


def channel_status(provider: dict[str, str]) -> ChannelStatus:
    status: ChannelStatus = {"provider_name": provider["name"], "status": provider["status"]}
    if provider.get("error"):
        status["error"] = provider["error"]
    return status
