"""Text to speech: one module per provider behind one small interface, and the chain of them a
call tries in order (the configured provider when it has credentials, then local espeak-ng)."""

from __future__ import annotations

from typing import Protocol

from agentcomms.config import Config
from agentcomms.errors import AgentcommsError

LOCAL = "local"


class Speech(Protocol):
    async def synthesize(self, text: str) -> tuple[bytes, str]:
        """The audio of `text` and its file extension ("wav", "mp3")."""
        ...


class ProviderUnavailable(AgentcommsError):
    """A speech provider that cannot be used as configured (no credentials, unknown name)."""


# Providers with a module here; a configured one without a module is skipped, not fatal.
KNOWN: tuple[str, ...] = (LOCAL, "openai")


def provider_chain(provider: str, has_key: bool, known: tuple[str, ...]) -> list[str]:
    """The providers a call tries, in order: the configured one when it can be used, then local
    (speech and hearing alike)."""
    usable = provider in known and provider != LOCAL and has_key
    return [provider, LOCAL] if usable else [LOCAL]


def tts_chain(cfg: Config) -> list[str]:
    tts = cfg.voice.tts
    return provider_chain(tts.provider, tts.api_key is not None, KNOWN)


def tts_provider(name: str, cfg: Config) -> Speech:
    if name == LOCAL:
        from agentcomms.voice.tts.local import EspeakSpeech

        return EspeakSpeech.from_config(cfg)
    if name == "openai":
        from agentcomms.voice.tts.openai import OpenAISpeech

        return OpenAISpeech.from_config(cfg)
    raise ProviderUnavailable(f"no text-to-speech provider {name!r}; known: {', '.join(KNOWN)}")
