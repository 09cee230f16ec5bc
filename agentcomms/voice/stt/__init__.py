"""Speech to text: one module per provider behind one small interface, and the chain of them a
call tries in order (the configured provider when it has credentials, then local pocketsphinx)."""

from __future__ import annotations

from typing import Protocol

from agentcomms.config import Config
from agentcomms.voice.tts import ProviderUnavailable, provider_chain

LOCAL = "local"
KNOWN: tuple[str, ...] = (LOCAL, "openai")


class Recognizer(Protocol):
    async def transcribe(self, audio: bytes, content_type: str) -> str: ...


def stt_chain(cfg: Config) -> list[str]:
    stt = cfg.voice.stt
    return provider_chain(stt.provider, stt.api_key is not None, KNOWN)


def stt_provider(name: str, cfg: Config) -> Recognizer:
    if name == LOCAL:
        from agentcomms.voice.stt.local import SphinxRecognizer

        return SphinxRecognizer(grammar=cfg.voice.stt.grammar)
    if name == "openai":
        from agentcomms.voice.stt.openai import OpenAIRecognizer

        return OpenAIRecognizer.from_config(cfg)
    raise ProviderUnavailable(f"no speech-to-text provider {name!r}; known: {', '.join(KNOWN)}")
