"""Speech to text: one module per provider behind one small interface, and the chain of them a
call tries in order (see `agentcomms.voice.providers`; local pocketsphinx ends it)."""

from __future__ import annotations

from typing import Protocol

from agentcomms.config import Config
from agentcomms.voice.providers import KNOWN, LOCAL, ProviderUnavailable, provider_chain


class Recognizer(Protocol):
    async def transcribe(self, audio: bytes, content_type: str) -> str: ...


def stt_chain(cfg: Config) -> list[str]:
    return provider_chain(cfg, "stt")


def stt_provider(name: str, cfg: Config) -> Recognizer:
    if name == LOCAL:
        from agentcomms.voice.stt.local import SphinxRecognizer

        return SphinxRecognizer(grammar=cfg.voice.stt.grammar)
    if name == "deepgram":
        from agentcomms.voice.stt.deepgram import DeepgramRecognizer

        return DeepgramRecognizer.from_config(cfg)
    if name == "elevenlabs":
        from agentcomms.voice.stt.elevenlabs import ElevenLabsRecognizer

        return ElevenLabsRecognizer.from_config(cfg)
    if name == "openai":
        from agentcomms.voice.stt.openai import OpenAIRecognizer

        return OpenAIRecognizer.from_config(cfg)
    raise ProviderUnavailable(f"no speech-to-text provider {name!r}; known: {', '.join(KNOWN)}")
