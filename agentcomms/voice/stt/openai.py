"""Speech to text with OpenAI's audio API (the `openai` SDK; `base_url` points it elsewhere)."""

from __future__ import annotations

from agentcomms.config import Config
from agentcomms.voice.providers import (
    Account,
    language_code,
    refusal,
    require_account,
    setting,
)

NAME = "openai"
DEFAULT_MODEL = "whisper-1"


class OpenAIRecognizer:
    def __init__(self, account: Account, *, model: str, language: str) -> None:
        self.account = account
        self.model = model
        self.language = language

    @classmethod
    def from_config(cls, cfg: Config) -> OpenAIRecognizer:
        stt = cfg.voice.stt
        return cls(
            require_account(cfg, "stt", NAME),
            model=setting(stt, "model", NAME, DEFAULT_MODEL),
            language=language_code(stt.language),
        )

    async def transcribe(self, audio: bytes, content_type: str) -> str:
        import openai

        name = "answer.mp3" if "mpeg" in content_type else "answer.wav"
        client = openai.AsyncOpenAI(
            api_key=self.account.api_key, base_url=self.account.base_url, max_retries=0
        )
        try:
            result = await client.audio.transcriptions.create(
                model=self.model, file=(name, audio, content_type), language=self.language
            )
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            # Not OpenAI's message: it quotes part of the key.
            raise refusal("OpenAI", self.account, exc.status_code, None) from None
        finally:
            await client.close()
        return result.text.strip()
