"""Text to speech with OpenAI's audio API (the `openai` SDK; `base_url` points it elsewhere)."""

from __future__ import annotations

from agentcomms.config import Config
from agentcomms.voice.providers import Account, refusal, require_account, setting

NAME = "openai"
DEFAULT_MODEL = "gpt-4o-mini-tts"
DEFAULT_VOICE = "alloy"


class OpenAISpeech:
    def __init__(self, account: Account, *, model: str, voice: str) -> None:
        self.account = account
        self.model = model
        self.voice = voice

    @classmethod
    def from_config(cls, cfg: Config) -> OpenAISpeech:
        tts = cfg.voice.tts
        return cls(
            require_account(cfg, "tts", NAME),
            model=setting(tts, "model", NAME, DEFAULT_MODEL),
            voice=setting(tts, "voice", NAME, DEFAULT_VOICE),
        )

    async def synthesize(self, text: str) -> tuple[bytes, str]:
        import openai

        # Retries are the activity's (and then the next provider's), not the SDK's.
        client = openai.AsyncOpenAI(
            api_key=self.account.api_key, base_url=self.account.base_url, max_retries=0
        )
        try:
            response = await client.audio.speech.create(
                model=self.model, voice=self.voice, input=text, response_format="wav"
            )
            return await response.aread(), "wav"
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            # Not OpenAI's message: it quotes part of the key.
            raise refusal("OpenAI", self.account, exc.status_code, None) from None
        finally:
            await client.close()
