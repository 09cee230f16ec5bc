"""Speech to text with ElevenLabs Scribe (the `elevenlabs` SDK; the account's `base_url` points
it elsewhere): the human's whole recording, one request."""

from __future__ import annotations

from agentcomms.voice.clients import elevenlabs_client
from agentcomms.voice.stt import CloudRecognizer, audio_kind


class ElevenLabsRecognizer(CloudRecognizer):
    name = "elevenlabs"
    default_model = "scribe_v1"
    uses = ("speech_to_text",)

    async def transcribe(self, audio: bytes, content_type: str) -> str:
        async with elevenlabs_client(self.account) as client:
            result = await client.speech_to_text.convert(
                model_id=self.model,
                file=(f"answer.{audio_kind(content_type)}", audio, content_type),
                language_code=self.language,
                request_options={"max_retries": 0},
            )
        text = getattr(result, "text", None)
        if text is None:  # a webhook's or a multichannel answer: neither is asked for
            raise RuntimeError("ElevenLabs answered without a transcript")
        return str(text).strip()
