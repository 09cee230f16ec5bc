"""Text to speech: one module per provider behind one small interface, and the chain of them a
call tries in order (see `agentcomms.voice.providers`; local espeak-ng ends it)."""

from __future__ import annotations

from typing import ClassVar, Protocol

from agentcomms.config import Config
from agentcomms.voice.accounts import Account
from agentcomms.voice.providers import (
    KNOWN,
    LOCAL,
    CloudProvider,
    provider_chain,
    provider_class,
    setting,
)

__all__ = [
    "KNOWN",
    "LOCAL",
    "PROVIDERS",
    "CloudSpeech",
    "Speech",
    "tts_chain",
    "tts_provider",
]


class Speech(Protocol):
    async def synthesize(self, text: str) -> tuple[bytes, str]:
        """The audio of `text` and its file extension ("wav", "mp3")."""
        ...


class CloudSpeech(CloudProvider):
    """A voice reached with an account: the model and voice the config gives it."""

    direction = "tts"
    default_voice: ClassVar[str]

    def __init__(self, account: Account, *, model: str, voice: str) -> None:
        super().__init__(account, model=model)
        self.voice = voice

    @classmethod
    def settings(cls, cfg: Config) -> dict[str, str]:
        voice = setting(cfg.voice.tts, "voice", cls.name, cls.default_voice)
        return {**super().settings(cfg), "voice": voice}


def tts_chain(cfg: Config) -> list[str]:
    return provider_chain(cfg, "tts")


# Each provider's class, by the name the config gives it.
PROVIDERS: dict[str, str] = {
    LOCAL: "agentcomms.voice.tts.local:EspeakSpeech",
    "elevenlabs": "agentcomms.voice.tts.elevenlabs:ElevenLabsSpeech",
    "deepgram": "agentcomms.voice.tts.deepgram:DeepgramSpeech",
    "openai": "agentcomms.voice.tts.openai:OpenAISpeech",
}


def tts_provider(name: str, cfg: Config) -> Speech:
    speech: Speech = provider_class(PROVIDERS, name, "text-to-speech").from_config(cfg)
    return speech
