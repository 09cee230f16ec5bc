"""Local speech, offline: espeak-ng speaks, pocketsphinx hears (exactly, within a grammar)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentcomms.config import Config, STTConfig, TTSConfig, VoiceConfig
from agentcomms.errors import SpeechProviderUnavailable
from agentcomms.voice.stt import stt_chain
from agentcomms.voice.stt.local import SphinxRecognizer
from agentcomms.voice.tts import tts_chain
from agentcomms.voice.tts.local import EspeakSpeech
from tests.support.voice import ANSWERS, write_grammar


@pytest.fixture(scope="module")
def grammar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_grammar(tmp_path_factory.mktemp("gram") / "answers.gram", ANSWERS)


@pytest.mark.parametrize("phrase", ANSWERS)
async def test_espeak_speaks_and_pocketsphinx_hears_it_within_a_grammar(
    phrase: str, grammar: Path
) -> None:
    audio, ext = await EspeakSpeech().synthesize(phrase)
    assert ext == "wav" and audio[:4] == b"RIFF"
    assert await SphinxRecognizer(grammar=grammar).transcribe(audio, "audio/wav") == phrase


async def test_text_that_looks_like_an_option_is_spoken_not_parsed() -> None:
    audio, _ = await EspeakSpeech().synthesize("--help -v")
    assert len(audio) > 10_000  # about a second of speech, not espeak's usage text


async def test_a_missing_grammar_file_is_a_provider_problem(tmp_path: Path) -> None:
    audio, _ = await EspeakSpeech().synthesize("hello")
    with pytest.raises(SpeechProviderUnavailable, match="grammar"):
        await SphinxRecognizer(grammar=tmp_path / "nope.gram").transcribe(audio, "audio/wav")


def test_with_no_voice_configuration_the_chains_are_local() -> None:
    assert tts_chain(Config()) == ["local"] and stt_chain(Config()) == ["local"]
    # The seed's providers without credentials are skipped, not fatal.
    cfg = Config(voice=VoiceConfig(tts=TTSConfig(provider="elevenlabs"), stt=STTConfig()))
    assert tts_chain(cfg) == ["local"] and stt_chain(cfg) == ["local"]
