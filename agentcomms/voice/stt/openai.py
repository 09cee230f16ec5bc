"""Speech to text with OpenAI's audio API (the `openai` SDK; `base_url` points it elsewhere)."""

from __future__ import annotations

from agentcomms.config import Config
from agentcomms.voice.providers import (
    ProviderUnavailable,
    language_code,
    require_account,
    setting,
)

NAME = "openai"
DEFAULT_MODEL = "whisper-1"


class OpenAIRecognizer:
    def __init__(
        self, api_key: str, *, model: str, language: str, base_url: str | None = None
    ) -> None:
        self.api_key = api_key
        self.model = model
        self.language = language
        self.base_url = base_url

    @classmethod
    def from_config(cls, cfg: Config) -> OpenAIRecognizer:
        stt = cfg.voice.stt
        account = require_account(cfg, "stt", NAME)
        return cls(
            account.api_key,
            model=setting(stt, "model", NAME, DEFAULT_MODEL),
            language=language_code(stt.language),
            base_url=account.base_url,
        )

    async def transcribe(self, audio: bytes, content_type: str) -> str:
        import openai

        name = "answer.mp3" if "mpeg" in content_type else "answer.wav"
        client = openai.AsyncOpenAI(api_key=self.api_key, base_url=self.base_url, max_retries=0)
        try:
            result = await client.audio.transcriptions.create(
                model=self.model, file=(name, audio, content_type), language=self.language
            )
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise ProviderUnavailable(f"OpenAI refused the key: {exc}") from exc
        finally:
            await client.close()
        return result.text.strip()
