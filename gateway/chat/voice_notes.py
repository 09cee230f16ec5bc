"""Voice notes in chat: a human's audio turned into the words an agent reads.

Transcription runs here, in the gateway, before the message is accepted, not later in an
activity. A provider is acknowledged only once its message is durable, and a voice note is
durable as text, the one thing a pane can type: so the note is fetched and heard first, then
posted like any text. Should the gateway stop mid-way, nothing was acknowledged and the provider
delivers the note again (same message id, same event id). A note that no provider of the STT
chain can hear is recorded with the reason and answered, never dropped in silence. The cost is
a few seconds before the provider hears back, well inside what Telegram and Meta wait for;
Twilio waits 15 seconds for its webhook's answer, which the local recognizer and one answering
cloud provider keep to, but a chain of failing providers may not.

The chain is the one calls use (``voice.stt``, its fallback, the accounts), so with no account
the local recognizer hears notes offline. Audio is decoded here once (libsndfile reads Ogg/Opus,
which sox cannot) into a WAV every recognizer takes; what cannot be decoded here goes to the
providers as it came, and the cloud ones read most formats themselves.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from agentcomms.config import Config
from agentcomms.errors import (
    NotTranscribed,
    SpeechProviderUnavailable,
    Undecodable,
    VoiceNoteRefused,
)
from agentcomms.transports import VoiceNote
from agentcomms.voice.audio import VOICE_NOTES
from agentcomms.voice.providers import LOCAL
from agentcomms.voice.sndfile import decode
from agentcomms.voice.stt import stt_chain, stt_provider

log = logging.getLogger(__name__)

# Telegram's Bot API hands out files up to 20 MB; ten minutes is a long voice note already.
MAX_BYTES = 20 * 1024 * 1024
MAX_SECONDS = 600
# One provider's answer; a whole chain stays well inside a webhook's patience.
STT_TIMEOUT_S = 45.0
_EXTENSIONS = {"audio/ogg": ".ogg", "audio/opus": ".ogg", "audio/mpeg": ".mp3", "audio/wav": ".wav"}


@dataclass(frozen=True)
class Heard:
    text: str
    provider: str  # the STT provider that heard it
    audio: str  # the note's file, relative to the audio directory
    duration_s: float | None


class VoiceNotes:
    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg
        self._root = cfg.voice.audio_root()

    async def transcribe(self, event_id: str, note: VoiceNote) -> Heard:
        """Fetch, keep and hear a voice note. Raises :class:`NotTranscribed` for good; any other
        error means it may work later (the provider fetch failed for now)."""
        _check_limits(note.duration_s, note.size)
        try:
            audio = await note.fetch(MAX_BYTES)
        except VoiceNoteRefused as exc:
            raise NotTranscribed(str(exc)) from None
        _check_limits(None, len(audio))
        # Kept beside call audio, so a note that could not be heard can still be listened to.
        saved = await asyncio.to_thread(self._save, event_id, audio, note.content_type)
        content_type = note.content_type
        duration = note.duration_s
        try:
            decoded = await asyncio.to_thread(decode, audio)
        except Undecodable as exc:
            log.info("voice note %s not decoded here (%s): sent as it came", event_id, exc)
        else:
            _check_limits(decoded.duration_s, None, audio=saved)
            audio, content_type, duration = decoded.wav, "audio/wav", decoded.duration_s
        problems: list[str] = []
        for name in stt_chain(self._cfg):
            try:
                recognizer = stt_provider(name, self._cfg)
                text = await asyncio.wait_for(
                    recognizer.transcribe(audio, content_type), STT_TIMEOUT_S
                )
            except SpeechProviderUnavailable as exc:
                problems.append(f"{name}: {exc}")
                continue
            except Exception as exc:  # a provider's error or timeout: the next one may hear it
                log.warning("voice note %s: %s failed: %r", event_id, name, exc)
                problems.append(f"{name}: {type(exc).__name__} {exc}".strip())
                continue
            if text.strip():
                return Heard(text.strip(), name, saved, duration)
            problems.append(f"{name} heard no words")
        if content_type != "audio/wav" and problems[-1].startswith(f"{LOCAL}:"):
            problems[-1] = (
                f"{LOCAL}: cannot read {note.content_type} on this machine; a speech-to-text "
                "account (voice.deepgram, voice.openai or voice.elevenlabs) can"
            )
        raise NotTranscribed("; ".join(problems), audio=saved)

    def _save(self, event_id: str, audio: bytes, content_type: str) -> str:
        name = f"{VOICE_NOTES}/{event_id}{_EXTENSIONS.get(content_type.split(';')[0], '.audio')}"
        path = self._root / name
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(audio)
        tmp.replace(path)  # a note delivered again replaces its file, never mixes with it
        return name

    def path(self, name: str) -> Path:
        return self._root / name


def _check_limits(duration_s: float | None, size: int | None, *, audio: str | None = None) -> None:
    if duration_s is not None and duration_s > MAX_SECONDS:
        raise NotTranscribed(
            f"it is {duration_s / 60:.0f} minutes long, more than the {MAX_SECONDS // 60} "
            "minutes a voice note may last",
            audio=audio,
        )
    if size is not None and size > MAX_BYTES:
        raise NotTranscribed(
            f"it is {size / 1e6:.0f} MB, more than the {MAX_BYTES // (1024 * 1024)} MB a "
            "voice note may take",
            audio=audio,
        )
