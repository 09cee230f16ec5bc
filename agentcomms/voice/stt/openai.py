"""Speech to text with OpenAI's audio API (the `openai` SDK; `base_url` points it elsewhere)."""

from __future__ import annotations

from agentcomms.voice.clients import openai_client
from agentcomms.voice.stt import CloudRecognizer, audio_kind


class OpenAIRecognizer(CloudRecognizer):
    name = "openai"
    default_model = "whisper-1"
    uses = ("audio.transcriptions",)

    async def transcribe(self, audio: bytes, content_type: str) -> str:
        async with openai_client(self.account) as client:
            result = await client.audio.transcriptions.create(
                model=self.model,
                file=(f"answer.{audio_kind(content_type)}", audio, content_type),
                language=self.language,
            )
        return result.text.strip()
