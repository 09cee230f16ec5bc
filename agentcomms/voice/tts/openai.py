"""Text to speech with OpenAI's audio API (the `openai` SDK; `base_url` points it elsewhere)."""

from __future__ import annotations

from agentcomms.voice.clients import openai_client
from agentcomms.voice.tts import CloudSpeech


class OpenAISpeech(CloudSpeech):
    name = "openai"
    default_model = "gpt-4o-mini-tts"
    uses = ("audio.speech",)
    default_voice = "alloy"

    async def synthesize(self, text: str) -> tuple[bytes, str]:
        async with openai_client(self.account) as client:
            response = await client.audio.speech.create(
                model=self.model, voice=self.voice, input=text, response_format="wav"
            )
            return await response.aread(), "wav"
