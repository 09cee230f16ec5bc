"""Speech for the tests: voice notes as phones record them (espeak-ng's speech, encoded as
Ogg/Opus at 48 kHz, what Telegram and WhatsApp send, with the system's libsndfile, the decoder's
own library), and Deepgram's speech API on a local port."""

from __future__ import annotations

import asyncio
import ctypes
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest
from pydantic import SecretStr

from agentcomms.config import Config, PhoneConfig
from agentcomms.voice.sndfile import SFInfo, library
from agentcomms.voice.tts.local import EspeakSpeech
from tests.fakes.deepgram import FakeDeepgram
from tests.fakes.twilio import OUR_NUMBER
from tests.fakes.twilio_calls import FakeTwilioCalls

# What the human answers in the call tests: each phrase is one the local recognizer can hear
# exactly, within a grammar of them.
ANSWERS = ["yes go ahead", "no wait", "call me later", "ship it on friday"]

_SFM_WRITE = 0x20
_OGG_OPUS = 0x200000 | 0x0064
OPUS_RATE = 48_000


def _encode(wav: bytes) -> bytes:
    pcm = subprocess.run(
        # Opus is coded at 48 kHz, as phones record it.
        [
            *("sox", "-q", "-t", "wav", "-", "-t", "raw", "-r", str(OPUS_RATE), "-c", "1"),
            *("-b", "16", "-e", "signed-integer", "-"),
        ],
        input=wav,
        capture_output=True,
        check=True,
    ).stdout
    lib = library()
    lib.sf_writef_short.restype = ctypes.c_int64
    lib.sf_writef_short.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "note.opus"
        info = SFInfo(0, OPUS_RATE, 1, _OGG_OPUS, 0, 0)
        handle = lib.sf_open(os.fsencode(path), _SFM_WRITE, ctypes.byref(info))
        assert handle, lib.sf_strerror(None)
        lib.sf_writef_short(handle, pcm, len(pcm) // 2)
        lib.sf_close(handle)
        return path.read_bytes()


def write_grammar(path: Path, phrases: Iterable[str] = ANSWERS) -> Path:
    """A JSGF grammar at `path` whose sentences are `phrases`: pocketsphinx hears one of them."""
    path.write_text(
        "#JSGF V1.0;\ngrammar answers;\npublic <answer> = " + " | ".join(phrases) + ";\n"
    )
    return path


async def voice_note(phrase: str) -> bytes:
    """``phrase`` said by espeak-ng, as an Ogg/Opus voice note."""
    wav, _ = await EspeakSpeech().synthesize(phrase)
    return await asyncio.to_thread(_encode, wav)


@pytest.fixture
async def deepgram() -> AsyncIterator[FakeDeepgram]:
    """Deepgram's speech API on a local port (speech calls and voice notes both use it)."""
    fake = FakeDeepgram()
    async with fake.server:
        yield fake


@pytest.fixture
async def twilio_voice() -> AsyncIterator[FakeTwilioCalls]:
    """Twilio's phone network for calls, out and in (the Messages API fake is chat's
    `twilio`)."""
    fake = FakeTwilioCalls()
    await fake.server.start()
    yield fake
    await fake.stop()


def twilio_phone(twilio: FakeTwilioCalls, human: str) -> PhoneConfig:
    """The phone through Twilio's fake phone network: our number calls `human`."""
    return PhoneConfig(
        provider="twilio",
        account_sid=twilio.account_sid,
        auth_token=SecretStr(twilio.auth_token),
        from_number=OUR_NUMBER,
        to_number=human,
        base_url=twilio.base_url,
    )


def listening(cfg: Config, port: int) -> Config:
    """The gateway's webhooks on `port`, public at that very address (what Twilio's fake posts
    to, and what their signatures are checked against)."""
    server = cfg.server.model_copy(
        update={"http_port": port, "public_url": f"http://127.0.0.1:{port}"}
    )
    return cfg.model_copy(update={"server": server})
