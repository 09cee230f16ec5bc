"""Local text to speech with espeak-ng: offline, no account, a robotic but clear voice."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from agentcomms.config import Config, TTSConfig
from agentcomms.errors import SpeechProviderUnavailable
from agentcomms.voice.tts import LOCAL

DEFAULT_VOICE = "en-us"
ESPEAK_TIMEOUT_S = 60


class EspeakSpeech:
    def __init__(self, voice: str = DEFAULT_VOICE, *, binary: str = "espeak-ng") -> None:
        self.voice = voice
        self.binary = binary

    @classmethod
    def from_config(cls, cfg: Config) -> EspeakSpeech:
        tts = cfg.voice.tts
        # `voice` names a voice of the configured provider ("Rachel" is ElevenLabs'); espeak's
        # own voice names ("en-us", "en-gb+f3") apply only when local is the chosen provider.
        default = TTSConfig.model_fields["voice"].default
        voice = tts.voice if tts.provider == LOCAL and tts.voice != default else DEFAULT_VOICE
        return cls(voice)

    async def synthesize(self, text: str) -> tuple[bytes, str]:
        binary = shutil.which(self.binary)
        if binary is None:
            raise SpeechProviderUnavailable(
                "espeak-ng is not installed (apt-get install espeak-ng); local speech needs it"
            )
        with tempfile.TemporaryDirectory(prefix="agentcomms-tts-") as tmp:
            out = Path(tmp) / "speech.wav"
            # The text goes in on stdin: as an argument, text starting with "-" is an option.
            proc = await asyncio.create_subprocess_exec(
                binary,
                "--stdin",
                "-v",
                self.voice,
                "-w",
                str(out),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                _, err = await asyncio.wait_for(
                    proc.communicate(text.encode("utf-8")), ESPEAK_TIMEOUT_S
                )
            except TimeoutError:
                proc.kill()
                await proc.wait()
                raise
            if proc.returncode != 0 or not out.exists():
                detail = err.decode("utf-8", "replace").strip() or f"exit {proc.returncode}"
                raise RuntimeError(f"espeak-ng failed: {detail}")
            return out.read_bytes(), "wav"
