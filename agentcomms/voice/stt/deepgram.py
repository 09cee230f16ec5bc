"""Speech to text with Deepgram's prerecorded transcription (the `deepgram-sdk`; the account's
`base_url` points it elsewhere): the human's whole recording, one request."""

from __future__ import annotations

from agentcomms.voice.clients import deepgram_client
from agentcomms.voice.stt import CloudRecognizer


class DeepgramRecognizer(CloudRecognizer):
    name = "deepgram"
    default_model = "nova-2"
    uses = ("listen.v1.media",)

    @staticmethod
    def language_tag(language: str) -> str:
        return language  # Deepgram takes BCP-47 tags as they are ("en-US")

    async def transcribe(self, audio: bytes, content_type: str) -> str:
        async with deepgram_client(self.account) as client:
            result = await client.listen.v1.media.transcribe_file(
                # Sent as octet-stream (the SDK's choice): Deepgram finds the container.
                request=audio,
                model=self.model,
                language=self.language,
                smart_format=True,
            )
        results = getattr(result, "results", None)
        if results is None:  # an "accepted" answer: only asked for with a callback URL
            raise RuntimeError("Deepgram answered without a transcript")
        channels = results.channels or []
        alternatives = (channels[0].alternatives or []) if channels else []
        return (alternatives[0].transcript or "").strip() if alternatives else ""
