"""Speech to text: one module per provider behind one small interface, and the chain of them a
call tries in order (see `agentcomms.voice.providers`; local pocketsphinx ends it)."""

from __future__ import annotations

from typing import Protocol

from agentcomms.config import Config
from agentcomms.voice.accounts import Account
from agentcomms.voice.providers import (
    LOCAL,
    CloudProvider,
    language_code,
    provider_chain,
    provider_class,
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


# Each provider's class, by the name the config gives it.
PROVIDERS: dict[str, str] = {
    LOCAL: "agentcomms.voice.stt.local:SphinxRecognizer",
    "deepgram": "agentcomms.voice.stt.deepgram:DeepgramRecognizer",
    "elevenlabs": "agentcomms.voice.stt.elevenlabs:ElevenLabsRecognizer",
    "openai": "agentcomms.voice.stt.openai:OpenAIRecognizer",
}


def stt_provider(name: str, cfg: Config) -> Recognizer:
    recognizer: Recognizer = provider_class(PROVIDERS, name, "speech-to-text").from_config(cfg)
    return recognizer
