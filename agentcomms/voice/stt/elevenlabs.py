"""Speech to text with ElevenLabs Scribe (the `elevenlabs` SDK; the account's `base_url` points
it elsewhere): the human's whole recording, one request."""

from __future__ import annotations

import httpx

from agentcomms.config import Config
from agentcomms.voice.providers import (
    HTTP_TIMEOUT_S,
    Account,
    language_code,
    refusal,
    require_account,
    setting,
)

NAME = "elevenlabs"
DEFAULT_MODEL = "scribe_v1"


class ElevenLabsRecognizer:
    def __init__(self, account: Account, *, model: str, language: str) -> None:
        self.account = account
        self.model = model
        self.language = language

    @classmethod
    def from_config(cls, cfg: Config) -> ElevenLabsRecognizer:
        stt = cfg.voice.stt
        return cls(
            require_account(cfg, "stt", NAME),
            model=setting(stt, "model", NAME, DEFAULT_MODEL),
            language=language_code(stt.language),
        )

    async def transcribe(self, audio: bytes, content_type: str) -> str:
        from elevenlabs import AsyncElevenLabs
        from elevenlabs.core.api_error import ApiError

        name = "answer.mp3" if "mpeg" in content_type else "answer.wav"
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
            # Retries are the activity's (then the next provider's), not the SDK's: each request
            # says max_retries 0.
            client = AsyncElevenLabs(
                api_key=self.account.api_key, base_url=self.account.base_url, httpx_client=http
            )
            try:
                result = await client.speech_to_text.convert(
                    model_id=self.model,
                    file=(name, audio, content_type),
                    language_code=self.language,
                    request_options={"max_retries": 0},
                )
            except ApiError as exc:
                raise refusal("ElevenLabs", self.account, exc.status_code, exc.body) from None
        text = getattr(result, "text", None)
        if text is None:  # a webhook's or a multichannel answer: neither is asked for
            raise RuntimeError("ElevenLabs answered without a transcript")
        return str(text).strip()
