"""Every error agentcomms names, so callers can branch on them: the exception classes, by area in
this package's modules, and the ``ApplicationError`` type names that activities raise inside
Temporal.

Two families of classes: :class:`AgentcommsError` for mistakes a user can fix (printed as one
sentence, no traceback), and plain exceptions a caller turns into something else (a send's
retry decision, an error reply). Every class is importable from here except the MCP server's
(:mod:`agentcomms.errors.mcp`, which needs fastmcp). Workflows import this package: it and its
modules use only the standard library (``mcp`` aside).
"""

from __future__ import annotations

from agentcomms.errors.base import (
    AgentcommsError,
    ConfigError,
    PayloadDecryptionError,
    SearchAttributesMissing,
    StoppedDuringStartup,
    TemporalUnavailable,
)
from agentcomms.errors.bridge import (
    BridgeError,
    InvalidTarget,
    PaneNotFound,
    PaneNotReady,
    TmuxError,
)
from agentcomms.errors.chat import (
    AttachmentRefused,
    ChatProviderUnavailable,
    NoTransport,
    RateLimited,
    SendError,
    SendRefused,
    SetupFailed,
    VoiceNoteNotServed,
    VoiceNoteRefused,
)
from agentcomms.errors.gateway import (
    AnswerRefused,
    GatewayAlreadyRunning,
    GatewayError,
    GatewayUnavailable,
    ListenerUnavailable,
    MailboxFull,
    PanesUnknown,
    RpcError,
    TraceNotFound,
)
from agentcomms.errors.install import AgentConfigError
from agentcomms.errors.store import DatabaseUnavailable, EventNotFound, SchemaOutdated, StoreError
from agentcomms.errors.voice import NotTranscribed, SpeechProviderUnavailable, Undecodable

# ApplicationError type names raised by activities (non-retryable unless said otherwise). The
# strings are in histories and retry policies already recorded: they do not change.
PANE_NOT_FOUND = "PaneNotFound"  # retryable: the pane may come back
TMUX_FAILED = "TmuxFailed"  # retryable: a transient tmux error
# non-retryable: nothing typed, the pane is not ready; the mailbox waits for the agent
PANE_NOT_READY = "PaneNotReady"
INVALID_TARGET = "InvalidTarget"  # non-retryable: the target cannot name a pane
CHAT_RATE_LIMITED = "ChatRateLimited"  # retryable, after the delay the provider asked for
CHAT_UNAVAILABLE = "ChatUnavailable"  # retryable: the provider's network or 5xx, with backoff
CHAT_REFUSED = "ChatRefused"  # non-retryable: unknown chat, no permission, bad token
CHAT_NOT_CONFIGURED = "ChatNotConfigured"  # non-retryable: the provider is off or lacks credentials
# non-retryable: a speech provider without credentials or tool; the next provider is tried
SPEECH_PROVIDER_UNAVAILABLE = "ProviderUnavailable"
AUDIO_MISSING = "AudioMissing"  # non-retryable: the audio file a reference names is gone
SPEECH_FAILED = "SpeechFailed"  # retryable: a provider's error; after the retries, the next one
CALL_ENDED = "CallEnded"  # non-retryable: a turn asked of a call that has ended
MAILBOX_REFUSED = "MailboxFull"  # retryable: the agent's mailbox is at its limits for now
CALL_REFUSED = "CallRefused"  # non-retryable: the call system refused (number, account, config)
CALL_SYSTEM_UNAVAILABLE = "CallSystemUnavailable"  # retryable: the call system's network or 5xx
NOT_SIGNED = "NotSignedByDeployment"  # non-retryable: the event is rejected, never typed
# What a person reading a refused message is told (`events`, `trace`, `send --wait`).
NOT_SIGNED_SENTENCE = (
    "not signed by this deployment: it did not come through agentcomms (or was altered since), "
    "so it was not typed"
)
NOT_A_MAILBOX = "NotAnAgentMailbox"  # non-retryable: a pane activity asked for by anyone else
NOT_A_CALL = "NotTheCallsWorkflow"  # non-retryable: a call's activity asked for by anyone else
NOT_A_LADDER = "NotTheRequestsWorkflow"  # non-retryable: a rung asked for by anyone else
NOT_AN_APPROVAL = "NotTheApprovalsWorkflow"  # non-retryable: an answer checked for anyone else
NOT_LOCAL = "NotALocalActivity"  # non-retryable: a projection write scheduled by anyone
REGISTRATION_NOT_SIGNED = "RegistrationNotSigned"  # non-retryable: the pane waits for a real one

__all__ = [
    "AUDIO_MISSING",
    "CALL_ENDED",
    "CALL_REFUSED",
    "CALL_SYSTEM_UNAVAILABLE",
    "CHAT_NOT_CONFIGURED",
    "CHAT_RATE_LIMITED",
    "CHAT_REFUSED",
    "CHAT_UNAVAILABLE",
    "INVALID_TARGET",
    "MAILBOX_REFUSED",
    "NOT_AN_APPROVAL",
    "NOT_A_CALL",
    "NOT_A_LADDER",
    "NOT_SIGNED",
    "NOT_SIGNED_SENTENCE",
    "PANE_NOT_FOUND",
    "PANE_NOT_READY",
    "REGISTRATION_NOT_SIGNED",
    "SPEECH_FAILED",
    "SPEECH_PROVIDER_UNAVAILABLE",
    "TMUX_FAILED",
    "AgentConfigError",
    "AgentcommsError",
    "AnswerRefused",
    "AttachmentRefused",
    "BridgeError",
    "ChatProviderUnavailable",
    "ConfigError",
    "DatabaseUnavailable",
    "EventNotFound",
    "GatewayAlreadyRunning",
    "GatewayError",
    "GatewayUnavailable",
    "InvalidTarget",
    "ListenerUnavailable",
    "MailboxFull",
    "NoTransport",
    "NotTranscribed",
    "PaneNotFound",
    "PaneNotReady",
    "PanesUnknown",
    "PayloadDecryptionError",
    "RateLimited",
    "RpcError",
    "SchemaOutdated",
    "SearchAttributesMissing",
    "SendError",
    "SendRefused",
    "SetupFailed",
    "SpeechProviderUnavailable",
    "StoppedDuringStartup",
    "StoreError",
    "TemporalUnavailable",
    "TmuxError",
    "TraceNotFound",
    "Undecodable",
    "VoiceNoteNotServed",
    "VoiceNoteRefused",
]
