"""Reading compressed audio with the system's libsndfile (ctypes; it comes with sox).

Chat voice notes are Ogg/Opus (Telegram, WhatsApp). sox reads Ogg/Vorbis but not Opus, and its
own libsndfile handler does not know the Opus subtype, while libsndfile itself (1.0.29 and
later) decodes Opus, Vorbis, FLAC and MP3. So a voice note is decoded here to 16-bit samples and
wrapped in a WAV, which every recognizer takes (the local one after sox resamples it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import io
import os
import tempfile
import wave
from dataclasses import dataclass

from agentcomms.errors import Undecodable

SFM_READ = 0x10


class SFInfo(ctypes.Structure):
    _fields_ = [
        ("frames", ctypes.c_int64),
        ("samplerate", ctypes.c_int),
        ("channels", ctypes.c_int),
        ("format", ctypes.c_int),
        ("sections", ctypes.c_int),
        ("seekable", ctypes.c_int),
    ]


@functools.cache
def library() -> ctypes.CDLL:
    name = ctypes.util.find_library("sndfile") or "libsndfile.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        raise Undecodable(f"libsndfile is not installed ({exc})") from None
    lib.sf_open.restype = ctypes.c_void_p
    lib.sf_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(SFInfo)]
    lib.sf_readf_short.restype = ctypes.c_int64
    lib.sf_readf_short.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    lib.sf_close.argtypes = [ctypes.c_void_p]
    lib.sf_strerror.restype = ctypes.c_char_p
    lib.sf_strerror.argtypes = [ctypes.c_void_p]
    return lib


@dataclass(frozen=True)
class Decoded:
    wav: bytes  # 16-bit PCM at the file's own rate and channels
    duration_s: float


def decode(audio: bytes) -> Decoded:
    """Any audio libsndfile reads, as a WAV; blocking (run it in a thread)."""
    lib = library()
    # libsndfile reads files; a voice note is at most a few megabytes.
    with tempfile.NamedTemporaryFile(suffix=".audio") as tmp:
        tmp.write(audio)
        tmp.flush()
        info = SFInfo()
        handle = lib.sf_open(os.fsencode(tmp.name), SFM_READ, ctypes.byref(info))
        if not handle:
            raise Undecodable(lib.sf_strerror(None).decode("utf-8", "replace"))
        try:
            if info.samplerate <= 0 or info.channels <= 0:
                raise Undecodable("no audio in it")
            buffer = ctypes.create_string_buffer(max(info.frames, 0) * info.channels * 2)
            frames = lib.sf_readf_short(handle, buffer, info.frames)
        finally:
            lib.sf_close(handle)
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(info.channels)
        wav.setsampwidth(2)
        wav.setframerate(info.samplerate)
        wav.writeframes(buffer.raw[: frames * info.channels * 2])
    return Decoded(out.getvalue(), round(frames / info.samplerate, 3))
