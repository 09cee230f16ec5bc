"""What a chat provider's transport raises: a send that failed (the subclass says whether and
when to try again), a provider with no transport, a voice note whose audio is not handed over;
and a step of a provider's guided setup that failed."""

from __future__ import annotations

from agentcomms.errors.base import AgentcommsError


class SendError(Exception):
    """A send failed; the subclass says whether and when to try again."""


class RateLimited(SendError):
    """The provider asked us to wait ``retry_after`` seconds before trying again."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ChatProviderUnavailable(SendError):
    """A transient failure (network, the provider's 5xx): try again with backoff."""


class SendRefused(SendError):
    """A permanent failure (unknown chat, no permission, bad token): its message says what to fix."""


class NoTransport(LookupError):
    """The provider is named in the configuration but has no transport module yet."""


class VoiceNoteRefused(Exception):
    """The provider will not hand over a voice note's audio; the message says why, for the human."""


class AttachmentRefused(Exception):
    """A human's photo or document will not reach the agent; the message says why, for them."""


class VoiceNoteNotServed(Exception):
    """The provider could not serve a voice note's audio this time; asking again may work."""


class SetupFailed(AgentcommsError):
    """A step of `agentcomms setup` failed: what the provider answered, and what to do."""
