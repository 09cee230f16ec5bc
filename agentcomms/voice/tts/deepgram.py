"""Text to speech with Deepgram Aura (the `deepgram-sdk`; the account's `base_url` points it
elsewhere). Aura's voice is its model: `voice.tts.model`, e.g. "aura-2-thalia-en"."""

from __future__ import annotations

from agentcomms.voice.clients import deepgram_client
from agentcomms.voice.providers import CloudProvider


class DeepgramSpeech(CloudProvider):
    name = "deepgram"
    direction = "tts"
    default_model = "aura-2-thalia-en"
    uses = ("speak.v1.audio",)

    async def synthesize(self, text: str) -> tuple[bytes, str]:
        async with deepgram_client(self.account) as client:
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
        return b"".join(chunks), "wav"
