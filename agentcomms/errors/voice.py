"""What speech and audio raise: a provider that cannot be used, audio that cannot be read, a
voice note nobody could hear."""

from __future__ import annotations

from agentcomms.errors.base import AgentcommsError


class SpeechProviderUnavailable(AgentcommsError):
    """A speech provider that cannot be used as configured (no key, a refused key, an unknown
    name or voice): permanent, so trying it again is pointless and the next provider of the chain
    is tried at once. (A chat provider's transient outage is ``ChatProviderUnavailable``.)"""


class Undecodable(Exception):
    """libsndfile is missing, or cannot read this audio."""


class NotTranscribed(Exception):
    """A voice note no provider could hear; the message says why, in words for the human."""

    def __init__(self, reason: str, *, audio: str | None = None) -> None:
        super().__init__(reason)
        self.audio = audio
