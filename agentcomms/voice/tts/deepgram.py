"""Text to speech with Deepgram Aura (the `deepgram-sdk`; the account's `base_url` points it
elsewhere). Aura's voice is its model: `voice.tts.model`, e.g. "aura-2-thalia-en"."""

from __future__ import annotations

import httpx

from agentcomms.config import Config
from agentcomms.voice.deepgram_client import deepgram_client
from agentcomms.voice.providers import (
    HTTP_TIMEOUT_S,
    Account,
    refusal,
    require_account,
    setting,
)

NAME = "deepgram"
DEFAULT_MODEL = "aura-2-thalia-en"


class DeepgramSpeech:
    def __init__(self, account: Account, *, model: str) -> None:
        self.account = account
        self.model = model

    @classmethod
    def from_config(cls, cfg: Config) -> DeepgramSpeech:
        tts = cfg.voice.tts
        return cls(
            require_account(cfg, "tts", NAME), model=setting(tts, "model", NAME, DEFAULT_MODEL)
        )

    async def synthesize(self, text: str) -> tuple[bytes, str]:
        from deepgram.core.api_error import ApiError

        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
            client = deepgram_client(self.account, http)
            try:
                # WAV (16-bit PCM): the local phone plays it and local STT reads it back.
                chunks = [
                    chunk
                    async for chunk in client.speak.v1.audio.generate(
                        text=text,
                        model=self.model,
                        encoding="linear16",
                        container="wav",
                    )
                ]
            except ApiError as exc:
                raise refusal("Deepgram", self.account, exc.status_code, exc.body) from None
        return b"".join(chunks), "wav"
