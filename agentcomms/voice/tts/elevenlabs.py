"""Text to speech with ElevenLabs (the `elevenlabs` SDK; the account's `base_url` points it
elsewhere).

The API addresses voices by id. `voice.tts.voice` may be an id, or a name: "Rachel" (the seed's
default, a premade voice) is known here, any other name is looked up among the account's voices.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agentcomms.errors import SpeechProviderUnavailable
from agentcomms.voice.clients import elevenlabs_client
from agentcomms.voice.tts import CloudSpeech

if TYPE_CHECKING:  # the SDK is imported when a call speaks through it
    from elevenlabs import AsyncElevenLabs

PREMADE_VOICES = {"rachel": "21m00Tcm4TlvDq8EOaVB"}
# WAV: the local phone plays it (aplay), local STT reads it back, and Twilio plays it.
OUTPUT_FORMAT = "wav_22050"

_VOICE_ID = re.compile(r"[A-Za-z0-9]{20}")
# Voice names looked up once per process, by account and name.
_voice_ids: dict[tuple[str, str | None, str], str] = {}


class ElevenLabsSpeech(CloudSpeech):
    name = "elevenlabs"
    default_model = "eleven_turbo_v2_5"
    uses = ("text_to_speech", "voices")
    default_voice = "Rachel"

    async def synthesize(self, text: str) -> tuple[bytes, str]:
        async with elevenlabs_client(self.account) as client:
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
                raise SpeechProviderUnavailable(
                    f"ElevenLabs has no voice named {self.voice!r} in this account: set "
                    "voice.tts.voice to one of its voices' names or ids"
                )
            _voice_ids[key] = named[0].voice_id
        return _voice_ids[key]
