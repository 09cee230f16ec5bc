"""Text to speech with OpenAI's audio API (the `openai` SDK; `base_url` points it elsewhere)."""

from __future__ import annotations

from agentcomms.config import Config
from agentcomms.voice.providers import ProviderUnavailable, require_account, setting

NAME = "openai"
DEFAULT_MODEL = "gpt-4o-mini-tts"
DEFAULT_VOICE = "alloy"


class OpenAISpeech:
    def __init__(
        self, api_key: str, *, model: str, voice: str, base_url: str | None = None
    ) -> None:
        self.api_key = api_key
        self.model = model
        self.voice = voice
        self.base_url = base_url

    @classmethod
    def from_config(cls, cfg: Config) -> OpenAISpeech:
        tts = cfg.voice.tts
        account = require_account(cfg, "tts", NAME)
        model = setting(tts, "model", NAME, DEFAULT_MODEL)
        voice = setting(tts, "voice", NAME, DEFAULT_VOICE)
        return cls(account.api_key, model=model, voice=voice, base_url=account.base_url)

    async def synthesize(self, text: str) -> tuple[bytes, str]:
        import openai

        # Retries are the activity's (and then the next provider's), not the SDK's.
        client = openai.AsyncOpenAI(api_key=self.api_key, base_url=self.base_url, max_retries=0)
        try:
            response = await client.audio.speech.create(
                model=self.model, voice=self.voice, input=text, response_format="wav"
            )
            return await response.aread(), "wav"
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise ProviderUnavailable(f"OpenAI refused the key: {exc}") from exc
        finally:
            await client.close()
