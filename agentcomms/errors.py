"""Every error type agentcomms names, in one module so callers can branch on them.

Two families: :class:`AgentcommsError` for mistakes a user can fix (printed as one sentence, no
traceback), and the ``ApplicationError`` type names that activities raise inside Temporal.
"""

from __future__ import annotations


class AgentcommsError(Exception):
    """A problem the user can act on; its message says what was wrong and what to do."""


class ConfigError(AgentcommsError):
    """The configuration file or an override is unreadable, malformed or unsafe."""


class TemporalUnavailable(AgentcommsError):
    """No Temporal server answers and none could be started."""


class SearchAttributesMissing(AgentcommsError):
    """The namespace lacks agentcomms' search attributes and refused to add them."""


class GatewayUnavailable(AgentcommsError):
    """The gateway socket does not answer."""


class MailboxFull(AgentcommsError):
    """An agent's mailbox holds as much as its limits allow; the message was not accepted."""


# ApplicationError type names raised by activities (non-retryable unless said otherwise).
PANE_NOT_FOUND = "PaneNotFound"  # retryable: the pane may come back
TMUX_FAILED = "TmuxFailed"  # retryable: a transient tmux error
INVALID_TARGET = "InvalidTarget"  # non-retryable: the target cannot name a pane
CHAT_RATE_LIMITED = "ChatRateLimited"  # retryable, after the delay the provider asked for
CHAT_UNAVAILABLE = "ChatUnavailable"  # retryable: the provider's network or 5xx, with backoff
CHAT_REFUSED = "ChatRefused"  # non-retryable: unknown chat, no permission, bad token
CHAT_NOT_CONFIGURED = "ChatNotConfigured"  # non-retryable: the provider is off or lacks credentials
PROVIDER_UNAVAILABLE = "ProviderUnavailable"  # non-retryable: no credentials or tool; next provider
AUDIO_MISSING = "AudioMissing"  # non-retryable: the audio file a reference names is gone
SPEECH_FAILED = "SpeechFailed"  # retryable: a provider's error; after the retries, the next one
CALL_ENDED = "CallEnded"  # non-retryable: a turn asked of a call that has ended
MAILBOX_REFUSED = "MailboxFull"  # retryable: the agent's mailbox is at its limits for now
CALL_REFUSED = "CallRefused"  # non-retryable: the call system refused (number, account, config)
CALL_SYSTEM_UNAVAILABLE = "CallSystemUnavailable"  # retryable: the call system's network or 5xx
NOT_SIGNED = "NotSignedByDeployment"  # non-retryable: the event is rejected, never typed
REGISTRATION_NOT_SIGNED = "RegistrationNotSigned"  # non-retryable: the pane waits for a real one
NOT_A_MAILBOX = "NotAnAgentMailbox"  # non-retryable: a pane activity asked for by anyone else
