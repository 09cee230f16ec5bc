"""Text to speech with ElevenLabs (the `elevenlabs` SDK; the account's `base_url` points it
elsewhere).

The API addresses voices by id. `voice.tts.voice` may be an id, or a name: "Rachel" (the seed's
default, a premade voice) is known here, any other name is looked up among the account's voices.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import httpx

from agentcomms.config import Config
from agentcomms.voice.providers import (
    HTTP_TIMEOUT_S,
    Account,
    ProviderUnavailable,
    refusal,
    require_account,
    setting,
)

if TYPE_CHECKING:  # the SDK is imported when a call speaks through it
    from elevenlabs import AsyncElevenLabs

NAME = "elevenlabs"
DEFAULT_MODEL = "eleven_turbo_v2_5"
DEFAULT_VOICE = "Rachel"
PREMADE_VOICES = {"rachel": "21m00Tcm4TlvDq8EOaVB"}
# WAV: the local phone plays it (aplay), local STT reads it back, and Twilio plays it.
OUTPUT_FORMAT = "wav_22050"

_VOICE_ID = re.compile(r"[A-Za-z0-9]{20}")
# Voice names looked up once per process, by account and name.
_voice_ids: dict[tuple[str, str | None, str], str] = {}


class ElevenLabsSpeech:
    def __init__(self, account: Account, *, model: str, voice: str) -> None:
        self.account = account
        self.model = model
        self.voice = voice

    @classmethod
    def from_config(cls, cfg: Config) -> ElevenLabsSpeech:
        tts = cfg.voice.tts
        return cls(
            require_account(cfg, "tts", NAME),
            model=setting(tts, "model", NAME, DEFAULT_MODEL),
            voice=setting(tts, "voice", NAME, DEFAULT_VOICE),
        )

    async def synthesize(self, text: str) -> tuple[bytes, str]:
        from elevenlabs import AsyncElevenLabs
        from elevenlabs.core.api_error import ApiError

        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
            # Retries are the activity's (then the next provider's), not the SDK's: each request
            # says max_retries 0.
            client = AsyncElevenLabs(
                api_key=self.account.api_key, base_url=self.account.base_url, httpx_client=http
            )
            try:
                voice_id = await self._voice_id(client)
                chunks = [
                    chunk
                    async for chunk in client.text_to_speech.convert(
                        voice_id,
                        text=text,
                        model_id=self.model,
                        output_format=OUTPUT_FORMAT,
                        request_options={"max_retries": 0},
                    )
                ]
            except ApiError as exc:
                raise refusal("ElevenLabs", self.account, exc.status_code, exc.body) from None
        return b"".join(chunks), "wav"

    async def _voice_id(self, client: AsyncElevenLabs) -> str:
        if _VOICE_ID.fullmatch(self.voice):
            return self.voice
        if (premade := PREMADE_VOICES.get(self.voice.lower())) is not None:
            return premade
        key = (self.account.api_key, self.account.base_url, self.voice.lower())
        if key not in _voice_ids:
            found = await client.voices.search(
                search=self.voice, request_options={"max_retries": 0}
            )
            named = [v for v in found.voices if (v.name or "").lower() == self.voice.lower()]
            if not named:
                raise ProviderUnavailable(
                    f"ElevenLabs has no voice named {self.voice!r} in this account: set "
                    "voice.tts.voice to one of its voices' names or ids"
                )
            _voice_ids[key] = named[0].voice_id
        return _voice_ids[key]
