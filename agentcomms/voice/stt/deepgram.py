"""Speech to text with Deepgram's prerecorded transcription (the `deepgram-sdk`; the account's
`base_url` points it elsewhere): the human's whole recording, one request."""

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
DEFAULT_MODEL = "nova-2"


class DeepgramRecognizer:
    def __init__(self, account: Account, *, model: str, language: str) -> None:
        self.account = account
        self.model = model
        self.language = language

    @classmethod
    def from_config(cls, cfg: Config) -> DeepgramRecognizer:
        stt = cfg.voice.stt
        return cls(
            require_account(cfg, "stt", NAME),
            model=setting(stt, "model", NAME, DEFAULT_MODEL),
            language=stt.language,  # Deepgram takes BCP-47 tags as they are ("en-US")
        )

    async def transcribe(self, audio: bytes, content_type: str) -> str:
        from deepgram.core.api_error import ApiError

        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
            client = deepgram_client(self.account, http)
            try:
                result = await client.listen.v1.media.transcribe_file(
                    # Sent as octet-stream (the SDK's choice): Deepgram finds the container.
                    request=audio,
                    model=self.model,
                    language=self.language,
                    smart_format=True,
                )
            except ApiError as exc:
                raise refusal("Deepgram", self.account, exc.status_code, exc.body) from None
        results = getattr(result, "results", None)
        if results is None:  # an "accepted" answer: only asked for with a callback URL
            raise RuntimeError("Deepgram answered without a transcript")
        channels = results.channels or []
        alternatives = (channels[0].alternatives or []) if channels else []
        return (alternatives[0].transcript or "").strip() if alternatives else ""
