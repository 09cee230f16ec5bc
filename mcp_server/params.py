"""The tools' parameters: typed and described where declared, so the model reads the rules and
fastmcp rejects a wrong argument with an error naming it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agentcomms.ids import AGENT_ID_PATTERN
from agentcomms.models import MAX_MESSAGE_CHARS
from agentcomms.transports import ABILITIES
from mcp_server.shapes import Provider

# The gateway's caps (gateway.socket.params), checked here too so the error names the tool's argument.
MAX_WAIT_S = 300

OwnAgentId = Annotated[
    str | None,
    Field(
        pattern=AGENT_ID_PATTERN,
        description=(
            "Agent whose messages/events to read. Omit it to use your own id (from --agent or "
            "AGENTCOMMS_AGENT_ID). Over HTTP with a token it can only be your own."
        ),
    ),
]
ToAgentId = Annotated[
    str,
    Field(
        pattern=AGENT_ID_PATTERN,
        description="The agent to message (see list_agents); letters, digits, '.', '_', '-'.",
    ),
]
MessageText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_MESSAGE_CHARS,
        description="The text to send (one or more lines; at most 100,000 characters).",
    ),
]
CheckLimit = Annotated[
    int, Field(ge=1, le=100, description="Most messages to return (1-100); the rest wait.")
]
EventsLimit = Annotated[int, Field(ge=1, le=1000, description="Most events to return (1-1000).")]
HistoryLimit = Annotated[
    int, Field(ge=1, le=100, description="How many of the newest messages to return (1-100).")
]
SinceId = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=200,
        description="Return only events after this event id (e.g. the last id you saw); "
        "omit it to start at the agent's first event.",
    ),
]
ChatProvider = Annotated[
    Provider,
    Field(
        description="The chat provider. 'local' is the human's terminal (agentcomms inbox); "
        "each of the others works once its section chat.<provider> is configured."
    ),
]
ChatId = Annotated[
    str | int,
    Field(
        description="The chat within the provider: 'local' for the local provider, else the "
        "provider's chat/channel id or phone number (as check_messages reports it in chat_id)."
    ),
]
ReplyTo = Annotated[
    str | None,
    Field(min_length=1, max_length=200, description="Id of the message this answers (optional)."),
]
Files = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=4096)]] | None,
    Field(
        max_length=10,
        description="Files to send after the text, as attachments "
        f"({', '.join(n for n, a in ABILITIES.items() if a.files)}): paths in your "
        "own working folder (absolute, or relative to it), each within the size the operator "
        "allows (chat.max_file_bytes, 5 MB unless set).",
    ),
]
Urgent = Annotated[
    bool,
    Field(
        description="True for what cannot wait: unanswered, it escalates to an SMS and a call "
        "(as configured) until your human writes to you."
    ),
]
WaitTimeout = Annotated[
    float,
    Field(gt=0, le=MAX_WAIT_S, description="Seconds to wait at most (up to 300)."),
]
IncludeOffline = Annotated[
    bool, Field(description="Also list agents whose pane is not registered (offline).")
]
