"""The audio directory: every sound of every call, by reference (``<call id>/<name>.wav``).

The worker writes what the agent says (TTS) and the gateway what the human said (a recording);
workflows carry only the names. Both resolve a name under the same directory
(``voice.audio_dir``, ``<home>/audio`` by default), which a name can never leave.
"""

from __future__ import annotations

import contextlib
import os
import wave
from pathlib import Path

from agentcomms.voice.models import AudioRef, check_audio_name


class AudioStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, name: str) -> Path:
        """The file a reference names (checked: nothing outside the directory)."""
        return self.root / check_audio_name(name)

    def write(self, name: str, data: bytes, *, provider: str | None = None) -> AudioRef:
        """Store `data` under `name` atomically (a retried write replaces, never mixes)."""
        path = self.path(name)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        return self.ref(name, provider=provider)

    def ref(self, name: str, *, provider: str | None = None) -> AudioRef:
        path = self.path(name)
        content_type = "audio/mpeg" if path.suffix == ".mp3" else "audio/wav"
        return AudioRef(
            name=name,
            duration_s=wav_duration(path) if path.suffix == ".wav" else 0.0,
            content_type=content_type,
            provider=provider,
        )

    def read(self, name: str) -> bytes:
        return self.path(name).read_bytes()


def wav_duration(path: Path) -> float:
    """Seconds of audio in a WAV file; 0 when it cannot be read as one."""
    with contextlib.suppress(wave.Error, EOFError, OSError), wave.open(str(path), "rb") as wav:
        rate = wav.getframerate()
        return round(wav.getnframes() / rate, 3) if rate else 0.0
    return 0.0


def turn_audio_name(call_id: str, turn: int, speaker: str, ext: str = "wav") -> str:
    return f"{call_id}/{turn:03d}-{speaker}.{ext}"
