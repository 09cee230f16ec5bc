"""ElevenLabs and Deepgram speech through their real SDKs, pointed at fakes of their HTTP APIs;
the chain that names them, and what their refusals and failures mean for it."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, SpeechAccount, STTConfig, TTSConfig, VoiceConfig, redacted
from agentcomms.errors import SpeechProviderUnavailable
from agentcomms.voice.stt import stt_chain, stt_provider
from agentcomms.voice.tts import tts_chain, tts_provider
from agentcomms.voice.tts.local import EspeakSpeech
from agentcomms.workflow_ids import call_workflow_id
from tests.fakes import deepgram as dg
from tests.fakes import elevenlabs as xi
from tests.fakes.deepgram import FakeDeepgram
from tests.fakes.elevenlabs import FakeElevenLabs
from tests.support.phone import Phone, answer_aloud
from tests.support.stack import running_stack


@pytest.fixture
async def elevenlabs() -> AsyncIterator[FakeElevenLabs]:
    fake = FakeElevenLabs()
    async with fake.server:
        yield fake


@pytest.fixture(scope="module")
async def answer() -> bytes:
    """A recording of the human's answer (what the fakes check is a WAV)."""
    audio, _ = await EspeakSpeech().synthesize("yes go ahead")
    return audio


def accounts(
    elevenlabs: FakeElevenLabs,
    deepgram: FakeDeepgram,
    *,
    tts: TTSConfig | None = None,
    stt: STTConfig | None = None,
    elevenlabs_key: str = xi.API_KEY,
    deepgram_key: str = dg.API_KEY,
) -> VoiceConfig:
    """Both accounts set up, the seed's provider choices unless told otherwise."""
    return VoiceConfig(
        tts=tts or TTSConfig(),
        stt=stt or STTConfig(),
        elevenlabs=SpeechAccount(api_key=SecretStr(elevenlabs_key), base_url=elevenlabs.base_url),
        deepgram=SpeechAccount(api_key=SecretStr(deepgram_key), base_url=deepgram.base_url),
    )


# ---- the chain ---------------------------------------------------------------------------------


def test_the_seed_defaults_use_elevenlabs_and_deepgram_once_their_accounts_have_keys() -> None:
    voice = VoiceConfig(
        elevenlabs=SpeechAccount(api_key=SecretStr("k1")),
        deepgram=SpeechAccount(api_key=SecretStr("k2")),
    )
    assert tts_chain(Config(voice=voice)) == ["elevenlabs", "local"]
    assert stt_chain(Config(voice=voice)) == ["deepgram", "local"]


def test_the_fallback_list_names_the_providers_tried_next_and_those_without_keys_are_skipped() -> (
    None
):
    voice = VoiceConfig(
        tts=TTSConfig(provider="elevenlabs", fallback=["openai", "deepgram", "elevenlabs"]),
        stt=STTConfig(provider="deepgram", fallback=["nobody", "elevenlabs", "local", "openai"]),
        elevenlabs=SpeechAccount(api_key=SecretStr("k1")),
        deepgram=SpeechAccount(api_key=SecretStr("k2")),
    )
    # openai has no key; an unknown name is skipped; nothing after local is reached.
    assert tts_chain(Config(voice=voice)) == ["elevenlabs", "deepgram", "local"]
    assert stt_chain(Config(voice=voice)) == ["deepgram", "elevenlabs", "local"]


def test_a_sections_own_key_serves_its_provider_only() -> None:
    voice = VoiceConfig(tts=TTSConfig(provider="deepgram", api_key=SecretStr("k")))
    assert tts_chain(Config(voice=voice)) == ["deepgram", "local"]
    assert stt_chain(Config(voice=voice)) == ["local"]


# ---- speaking ----------------------------------------------------------------------------------


async def test_elevenlabs_speaks_the_text_in_rachels_voice_with_the_configured_model(
    elevenlabs: FakeElevenLabs, deepgram: FakeDeepgram
) -> None:
    cfg = Config(voice=accounts(elevenlabs, deepgram))
    audio, ext = await tts_provider("elevenlabs", cfg).synthesize("Deploy to staging?")
    assert elevenlabs.spoken == [
        {
            "voice_id": xi.RACHEL,  # "Rachel", the default, is a premade voice
            "model_id": "eleven_turbo_v2_5",
            "text": "Deploy to staging?",
            "output_format": "wav_22050",
        }
    ]
    assert elevenlabs.keys == [xi.API_KEY]
    assert (audio, ext) == (elevenlabs.audio[0], "wav")


async def test_an_elevenlabs_voice_name_is_looked_up_among_the_accounts_voices(
    elevenlabs: FakeElevenLabs, deepgram: FakeDeepgram
) -> None:
    elevenlabs.voices["Ada Lovelace"] = "AdaVoiceId0000000001"
    tts = TTSConfig(voice="ada lovelace", model="eleven_multilingual_v2")
    cfg = Config(voice=accounts(elevenlabs, deepgram, tts=tts))
    await tts_provider("elevenlabs", cfg).synthesize("one")
    await tts_provider("elevenlabs", cfg).synthesize("two")  # the id is remembered
    assert [s["voice_id"] for s in elevenlabs.spoken] == ["AdaVoiceId0000000001"] * 2
    assert elevenlabs.spoken[0]["model_id"] == "eleven_multilingual_v2"
    assert len(elevenlabs.keys) == 3  # one search, two syntheses

    cfg = Config(voice=accounts(elevenlabs, deepgram, tts=TTSConfig(voice="Nobody")))
    with pytest.raises(SpeechProviderUnavailable, match="no voice named 'Nobody'"):
        await tts_provider("elevenlabs", cfg).synthesize("three")


async def test_deepgram_speaks_with_aura_as_wav(
    elevenlabs: FakeElevenLabs, deepgram: FakeDeepgram
) -> None:
    # In a fallback, Deepgram uses its own voice: the section's voice and model are ElevenLabs'.
    tts = TTSConfig(provider="elevenlabs", fallback=["deepgram"])
    cfg = Config(voice=accounts(elevenlabs, deepgram, tts=tts))
    audio, ext = await tts_provider("deepgram", cfg).synthesize("Still there?")
    assert deepgram.spoken == [
        {
            "model": "aura-2-thalia-en",
            "encoding": "linear16",
            "container": "wav",
            "text": "Still there?",
        }
    ]
    assert deepgram.authorizations == [f"Token {dg.API_KEY}"]
    assert (audio, ext) == (deepgram.audio[0], "wav")

    tts = TTSConfig(provider="deepgram", model="aura-asteria-en")
    await tts_provider(
        "deepgram", Config(voice=accounts(elevenlabs, deepgram, tts=tts))
    ).synthesize("Asteria")
    assert deepgram.spoken[-1]["model"] == "aura-asteria-en"


# ---- hearing ----------------------------------------------------------------------------------


async def test_deepgram_hears_the_recording_with_the_configured_model_and_language(
    elevenlabs: FakeElevenLabs, deepgram: FakeDeepgram, answer: bytes
) -> None:
    deepgram.transcripts = ["Yes, go ahead."]
    cfg = Config(voice=accounts(elevenlabs, deepgram))
    assert await stt_provider("deepgram", cfg).transcribe(answer, "audio/wav") == "Yes, go ahead."
    assert deepgram.heard == [{"model": "nova-2", "language": "en-US", "container": "wav"}]
    assert deepgram.authorizations == [f"Token {dg.API_KEY}"]


async def test_elevenlabs_hears_with_scribe(
    elevenlabs: FakeElevenLabs, deepgram: FakeDeepgram, answer: bytes
) -> None:
    elevenlabs.transcripts = ["No, wait."]
    # In a fallback, ElevenLabs uses Scribe: the section's default model is Deepgram's.
    stt = STTConfig(provider="deepgram", fallback=["elevenlabs"], language="en-GB")
    cfg = Config(voice=accounts(elevenlabs, deepgram, stt=stt))
    assert await stt_provider("elevenlabs", cfg).transcribe(answer, "audio/wav") == "No, wait."
    assert elevenlabs.heard == [{"model_id": "scribe_v1", "language_code": "en"}]
    assert elevenlabs.keys == [xi.API_KEY]


# ---- refusals and failures ---------------------------------------------------------------------

PROVIDERS_BOTH_WAYS = [
    ("elevenlabs", "tts"),
    ("deepgram", "tts"),
    ("elevenlabs", "stt"),
    ("deepgram", "stt"),
]


async def use(provider: str, direction: str, cfg: Config, answer: bytes) -> bytes | str:
    if direction == "tts":
        audio, _ = await tts_provider(provider, cfg).synthesize("hello")
        return audio
    return await stt_provider(provider, cfg).transcribe(answer, "audio/wav")


@pytest.mark.parametrize(("provider", "direction"), PROVIDERS_BOTH_WAYS)
async def test_a_refused_key_is_permanent_and_names_the_key_to_fix_without_showing_it(
    provider: str, direction: str, elevenlabs: FakeElevenLabs, deepgram: FakeDeepgram, answer: bytes
) -> None:
    wrong = "wrong-key-1234567890"
    cfg = Config(voice=accounts(elevenlabs, deepgram, elevenlabs_key=wrong, deepgram_key=wrong))
    with pytest.raises(SpeechProviderUnavailable) as refused:
        await use(provider, direction, cfg, answer)
    message = str(refused.value)
    assert f"voice.{provider}.api_key (401)" in message and wrong not in message


@pytest.mark.parametrize("status", [429, 500, 503])
@pytest.mark.parametrize(("provider", "direction"), PROVIDERS_BOTH_WAYS)
async def test_a_busy_or_failing_provider_is_worth_retrying_and_the_next_try_works(
    provider: str,
    direction: str,
    status: int,
    elevenlabs: FakeElevenLabs,
    deepgram: FakeDeepgram,
    answer: bytes,
) -> None:
    fake = elevenlabs if provider == "elevenlabs" else deepgram
    fake.fail_next(status)
    fake.transcripts = ["after the failure"]
    cfg = Config(voice=accounts(elevenlabs, deepgram))
    with pytest.raises(Exception) as failed:
        await use(provider, direction, cfg, answer)
    # Not SpeechProviderUnavailable: the activity retries it (the SDK itself does not).
    assert not isinstance(failed.value, SpeechProviderUnavailable)
    assert str(status) in str(failed.value)
    result = await use(provider, direction, cfg, answer)
    if direction == "tts":
        assert result == fake.audio[-1] and len(fake.audio) == 1
    else:
        assert result == "after the failure" and len(fake.heard) == 1


# ---- in a call -----------------------------------------------------------------------------------


def _history_text(history: Any) -> str:
    """A workflow history as text, its payloads decoded (a key in one would show)."""
    parts = [history.to_json()]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "data" and isinstance(value, str):
                    parts.append(base64.b64decode(value).decode("utf-8", "replace"))
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(parts[0]))
    return "\n".join(parts)


async def test_a_call_through_elevenlabs_then_deepgram_then_local(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    elevenlabs: FakeElevenLabs,
    deepgram: FakeDeepgram,
) -> None:
    wrong = "xi-wrong-0123456789"
    deepgram.transcripts = ["Yes, ship it."]
    deepgram.fail_next(429, 500)  # busy, then down, then it hears
    voice = accounts(
        elevenlabs,
        deepgram,
        tts=TTSConfig(provider="elevenlabs", fallback=["deepgram"]),
        stt=STTConfig(provider="deepgram", fallback=["elevenlabs"]),
        elevenlabs_key=wrong,
    ).model_copy(update={"audio_dir": tmp_path / "audio"})
    async with running_stack(temporal_env.client, tmp_path, voice=voice) as stack:
        phone = Phone(stack)
        first = asyncio.create_task(stack.call("call", agent_id="a", message="Ship 0042?"))
        call_id = await phone.answer()
        line = await answer_aloud(phone, call_id, "yes ship it")
        # ElevenLabs refused its key: Deepgram spoke, the first time it was asked.
        assert line["audio"]["provider"] == "deepgram"
        assert [s["text"] for s in deepgram.spoken] == ["Ship 0042?"]
        assert (await first)["response"] == "Yes, ship it."
        await stack.call("call_end", call_id=call_id)
        history = await stack.client.get_workflow_handle(call_workflow_id(call_id)).fetch_history()
    assert elevenlabs.spoken == [] and elevenlabs.keys == [wrong]  # once: a refusal is not retried
    assert deepgram.heard == [{"model": "nova-2", "language": "en-US", "container": "wav"}]
    assert deepgram.authorizations.count(f"Token {dg.API_KEY}") == 1 + 3  # speak; listen x3
    recorded = _history_text(history)
    assert "ElevenLabs refused the key in voice.elevenlabs.api_key (401)" in recorded
    assert wrong not in recorded and dg.API_KEY not in recorded


def test_config_show_hides_the_accounts_keys() -> None:
    voice = VoiceConfig(
        elevenlabs=SpeechAccount(api_key=SecretStr("xi-secret-1"), base_url="http://proxy"),
        deepgram=SpeechAccount(api_key=SecretStr("dg-secret-2")),
    )
    shown = json.dumps(redacted(Config(voice=voice)))
    assert "xi-secret-1" not in shown and "dg-secret-2" not in shown
    assert redacted(Config(voice=voice))["voice"]["elevenlabs"] == {
        "api_key": "***",
        "base_url": "http://proxy",
    }
