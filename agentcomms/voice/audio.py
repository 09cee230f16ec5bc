"""The audio directory: every sound of every call, by reference (``<call id>/<name>.wav``).

The worker writes what the agent says (TTS) and the gateway what the human said (a recording);
workflows carry only the names. Both resolve a name under the same directory
(``voice.audio_dir``, ``<home>/audio`` by default), which a name can never leave.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import wave
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from agentcomms.voice.models import AudioRef, TurnRecord, check_audio_name

TRANSCRIPT = "transcript.jsonl"
# Where the gateway keeps the voice notes chats sent (one file each, beside the calls' folders).
VOICE_NOTES = "voice-notes"


class AudioStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, name: str) -> Path:
        """The file a reference names (checked: nothing outside the directory)."""
        return self.root / check_audio_name(name)

    def write(self, name: str, data: bytes, *, provider: str | None = None) -> AudioRef:
        """Store `data` under `name` atomically (a retried write replaces, never mixes)."""
        path = self.path(name)
        self._folder(path.parent)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
            out.write(data)
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

    def _folder(self, folder: Path) -> None:
        """A call's folder, and the directory above it, readable by the owner only: they hold
        people's voices and words."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder.mkdir(exist_ok=True, mode=0o700)

    def prune(self, older_than: float) -> int:
        """Delete what was last written before `older_than` (a Unix time): each call's folder
        whole (its sounds and transcript), and each voice note; how many went."""
        gone = 0
        with contextlib.suppress(FileNotFoundError):
            for folder in self.root.iterdir():
                if not folder.is_dir() or folder.is_symlink():
                    continue
                files = [f for f in folder.iterdir() if f.is_file()]
                if folder.name == VOICE_NOTES:
                    for note in files:
                        if note.stat().st_mtime < older_than:
                            note.unlink(missing_ok=True)
                            gone += 1
                elif max((f.stat().st_mtime for f in files), default=0) < older_than:
                    shutil.rmtree(folder, ignore_errors=True)
                    gone += 1
        return gone

    def transcript_ref(self, call_id: str) -> str:
        return f"{call_id}/{TRANSCRIPT}"

    def append_turns(self, call_id: str, turns: Iterable[TurnRecord]) -> None:
        """Append turns to the call's transcript, each (turn, speaker) once: a retried write
        (the writer died after writing, before saying so) appends nothing twice."""
        path = self.root / self.transcript_ref(call_id)
        self._folder(path.parent)
        written = {(t.turn, t.speaker) for t in self.transcript(call_id)}
        appending = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with open(appending, "a", encoding="utf-8") as out:
            if out.tell() and not path.read_bytes().endswith(b"\n"):
                out.write("\n")  # after a line a crash cut short
            for turn in turns:
                if (turn.turn, turn.speaker) in written:
                    continue
                out.write(json.dumps(turn.model_dump(mode="json"), ensure_ascii=False) + "\n")

    def transcript(self, call_id: str) -> list[TurnRecord]:
        """The call's turns as written, in order; a line a crash cut short is left out."""
        try:
            lines = (self.root / self.transcript_ref(call_id)).read_text("utf-8").splitlines()
        except (FileNotFoundError, ValueError):
            return []
        turns = []
        for line in lines:
            with contextlib.suppress(ValueError, ValidationError):
                turns.append(TurnRecord.model_validate_json(line))
        return turns


def wav_duration(path: Path) -> float:
    """Seconds of audio in a WAV file; 0 when it cannot be read as one."""
    with contextlib.suppress(wave.Error, EOFError, OSError), wave.open(str(path), "rb") as wav:
        rate = wav.getframerate()
        return round(wav.getnframes() / rate, 3) if rate else 0.0
    return 0.0


def turn_audio_name(call_id: str, turn: int, speaker: str, ext: str = "wav") -> str:
    return f"{call_id}/{turn:03d}-{speaker}.{ext}"
