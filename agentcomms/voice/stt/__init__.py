"""Speech to text: one module per provider behind one small interface, and the chain of them a
call tries in order (see `agentcomms.voice.providers`; local pocketsphinx ends it)."""

from __future__ import annotations

from typing import Protocol

from agentcomms.config import Config
from agentcomms.voice.providers import (
    KNOWN,
    LOCAL,
    Account,
    CloudProvider,
    ProviderUnavailable,
    language_code,
    provider_chain,
)


class Recognizer(Protocol):
    async def transcribe(self, audio: bytes, content_type: str) -> str: ...


class CloudRecognizer(CloudProvider):
    """A recognizer reached with an account: the model and language the config gives it."""

    direction = "stt"

    def __init__(self, account: Account, *, model: str, language: str) -> None:
        super().__init__(account, model=model)
        self.language = language

    @classmethod
    def settings(cls, cfg: Config) -> dict[str, str]:
        return {**super().settings(cfg), "language": cls.language_tag(cfg.voice.stt.language)}

    @staticmethod
    def language_tag(language: str) -> str:
        """`voice.stt.language` as the provider's API takes it: by default ISO-639-1 ("en")."""
        return language_code(language)


def audio_kind(content_type: str) -> str:
    """The container a recording's content type names: "mp3" or "wav"."""
    return "mp3" if "mpeg" in content_type else "wav"


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
