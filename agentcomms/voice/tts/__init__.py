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


def tts_chain(cfg: Config) -> list[str]:
    """The providers a call tries, in order: the configured one when it can be used, then local."""
    tts = cfg.voice.tts
    chain = []
    if tts.provider in KNOWN and (tts.provider == LOCAL or tts.api_key is not None):
        chain.append(tts.provider)
    if LOCAL not in chain:
        chain.append(LOCAL)
    return chain


def tts_provider(name: str, cfg: Config) -> Speech:
    if name == LOCAL:
        from agentcomms.voice.tts.local import EspeakSpeech

        return EspeakSpeech.from_config(cfg)
    if name == "openai":
        from agentcomms.voice.tts.openai import OpenAISpeech

        return OpenAISpeech.from_config(cfg)
    raise ProviderUnavailable(f"no text-to-speech provider {name!r}; known: {', '.join(KNOWN)}")
