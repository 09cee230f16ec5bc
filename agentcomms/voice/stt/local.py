"""Local speech to text with pocketsphinx (its English model ships in the wheel): offline.

Open vocabulary is rough, especially on synthetic voices; with a JSGF grammar of the answers
expected (`voice.stt.grammar`) recognition within it is exact and takes milliseconds.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path
from typing import Any

from agentcomms.config import Config
from agentcomms.errors import SpeechProviderUnavailable
from agentcomms.voice.stt import audio_kind

SAMPLE_RATE = 16_000
SOX_TIMEOUT_S = 60

# Loading the model takes a few hundred milliseconds: one decoder per grammar per process,
# used by one thread at a time.
_decoders: dict[str | None, tuple[Any, threading.Lock]] = {}
_decoders_lock = threading.Lock()


class SphinxRecognizer:
    def __init__(self, *, grammar: Path | None = None) -> None:
        self.grammar = grammar.expanduser() if grammar else None

    @classmethod
    def from_config(cls, cfg: Config) -> SphinxRecognizer:
        return cls(grammar=cfg.voice.stt.grammar)

    async def warm(self) -> None:
        """Load the model (and the grammar) now, which the first answer would wait for."""
        await asyncio.to_thread(_decoder, str(self.grammar) if self.grammar else None)

    async def transcribe(self, audio: bytes, content_type: str) -> str:
        raw = await to_pcm16(audio, audio_kind(content_type))
        return await asyncio.to_thread(self._decode, raw)

    def _decode(self, raw: bytes) -> str:
        decoder, lock = _decoder(str(self.grammar) if self.grammar else None)
        with lock:
            decoder.start_utt()
            decoder.process_raw(raw, full_utt=True)
            decoder.end_utt()
            hyp = decoder.hyp()
        return hyp.hypstr.strip() if hyp is not None else ""


def _decoder(grammar: str | None) -> tuple[Any, threading.Lock]:
    with _decoders_lock:
        found = _decoders.get(grammar)
        if found is None:
            try:
                from pocketsphinx import Decoder
            except ImportError as exc:  # pragma: no cover - a dependency of the package
                raise SpeechProviderUnavailable("pocketsphinx is not installed") from exc
            options: dict[str, Any] = {"samprate": SAMPLE_RATE, "loglevel": "FATAL"}
            if grammar is not None:
                if not Path(grammar).is_file():
                    raise SpeechProviderUnavailable(f"voice.stt.grammar: no file {grammar}")
                options["jsgf"] = grammar
            found = (Decoder(**options), threading.Lock())
            _decoders[grammar] = found
        return found


async def to_pcm16(audio: bytes, kind: str = "wav") -> bytes:
    """Any audio sox reads, as 16 kHz mono signed 16-bit samples (what the model expects)."""
    sox = shutil.which("sox")
    if sox is None:
        raise SpeechProviderUnavailable(
            "sox is not installed (apt-get install sox); local STT needs it"
        )
    proc = await asyncio.create_subprocess_exec(
        sox,
        "-q",
        "-t",
        kind,
        "-",
        "-t",
        "raw",
        "-r",
        str(SAMPLE_RATE),
        "-c",
        "1",
        "-b",
        "16",
        "-e",
        "signed-integer",
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(audio), SOX_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"sox could not read the audio: {err.decode('utf-8', 'replace')}")
    return out
