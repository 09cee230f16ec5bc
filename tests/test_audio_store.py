"""The audio directory keeps a call's sounds and transcript, and a voice note, for
`voice.audio_keep_days` after they were last written, and no longer."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

from agentcomms.config import VoiceConfig
from agentcomms.voice.audio import VOICE_NOTES, AudioStore
from agentcomms.voice.models import TurnRecord

DAY = 86_400


def _aged(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then))


def test_what_was_last_written_before_the_kept_days_is_deleted(tmp_path: Path) -> None:
    audio = AudioStore(tmp_path / "audio")
    said = TurnRecord(turn=1, speaker="agent", text="Ship it?", at=datetime.now(UTC))
    for call in ("c_old", "c_recent", "c_still_talking"):
        audio.write(f"{call}/001-agent.wav", b"RIFF....")
        audio.append_turns(call, [said])
    for sound in (tmp_path / "audio" / "c_old").iterdir():
        _aged(sound, 40)
    # A call's folder goes only once its newest file is old: one still written to stays.
    _aged(tmp_path / "audio" / "c_still_talking" / "001-agent.wav", 40)
    notes = tmp_path / "audio" / VOICE_NOTES  # as the gateway keeps a chat's voice notes
    notes.mkdir()
    for note in ("evt_old.ogg", "evt_new.ogg"):
        (notes / note).write_bytes(b"OggS")
    _aged(notes / "evt_old.ogg", 40)

    assert audio.prune(time.time() - VoiceConfig().audio_keep_days * DAY) == 2
    assert sorted(p.name for p in (tmp_path / "audio").iterdir()) == [
        "c_recent",
        "c_still_talking",
        VOICE_NOTES,
    ]
    assert [p.name for p in notes.iterdir()] == ["evt_new.ogg"]
    assert audio.transcript("c_old") == [] and audio.transcript("c_recent") == [said]
    assert AudioStore(tmp_path / "nowhere").prune(time.time()) == 0


def test_the_sounds_and_transcripts_are_the_owners_alone(tmp_path: Path) -> None:
    audio = AudioStore(tmp_path / "audio")
    audio.write("c_mine/001-agent.wav", b"RIFF....")
    said = TurnRecord(turn=1, speaker="human", text="yes", at=datetime.now(UTC))
    audio.append_turns("c_mine", [said])
    audio.append_turns("c_mine", [said])  # a retried write appends nothing twice
    assert audio.transcript("c_mine") == [said]
    for path in (audio.root, audio.root / "c_mine"):
        assert path.stat().st_mode & 0o777 == 0o700, path
    for path in (audio.path("c_mine/001-agent.wav"), audio.root / "c_mine/transcript.jsonl"):
        assert path.stat().st_mode & 0o777 == 0o600, path
