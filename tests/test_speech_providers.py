"""Cloud speech in a call, through the real `openai` SDK pointed at a fake of OpenAI's audio
endpoints; and the chain falling back to local speech when the provider fails."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, STTConfig, TTSConfig, VoiceConfig
from agentcomms.errors import SpeechProviderUnavailable
from agentcomms.voice import stt, tts
from agentcomms.voice.providers import CLOUD, KNOWN
from agentcomms.voice.stt import stt_chain
from agentcomms.voice.tts import tts_chain
from tests.fakes.deepgram import FakeDeepgram
from tests.fakes.openai_audio import API_KEY, FakeOpenAIAudio
from tests.support.phone import Phone, answer_aloud
from tests.support.stack import running_stack


@pytest.fixture
async def openai_fake() -> AsyncIterator[FakeOpenAIAudio]:
    fake = FakeOpenAIAudio()
    async with fake.server:
        yield fake


def openai_voice(tmp_path: Path, fake: FakeOpenAIAudio, key: str = API_KEY) -> VoiceConfig:
    return VoiceConfig(
        audio_dir=tmp_path / "audio",
        tts=TTSConfig(provider="openai", api_key=SecretStr(key), base_url=fake.base_url),
        stt=STTConfig(provider="openai", api_key=SecretStr(key), base_url=fake.base_url),
    )


def test_a_provider_with_a_key_comes_first_and_local_ends_the_chain(tmp_path: Path) -> None:
    cfg = Config(voice=openai_voice(tmp_path, FakeOpenAIAudio()))
    assert tts_chain(cfg) == ["openai", "local"] and stt_chain(cfg) == ["openai", "local"]


@pytest.mark.parametrize(
    ("kind", "make"), [(tts, tts.tts_provider), (stt, stt.stt_provider)], ids=["tts", "stt"]
)
def test_every_known_provider_is_made_from_its_kinds_one_table(
    tmp_path: Path, kind: ModuleType, make: Callable[[str, Config], Any]
) -> None:
    cfg = Config(voice=openai_voice(tmp_path, FakeOpenAIAudio()))
    assert sorted(kind.PROVIDERS) == sorted(KNOWN)
    for name in CLOUD:
        if name != "openai":  # the others have no key here: said at once, naming the key
            with pytest.raises(SpeechProviderUnavailable, match=f"voice.{name}.api_key"):
                make(name, cfg)
    assert make("openai", cfg).name == "openai"
    assert type(make("local", cfg)).__module__.endswith(".local")
    with pytest.raises(
        SpeechProviderUnavailable, match=r"no .* provider 'whisper'; known: elevenlabs"
    ):
        make("whisper", cfg)


WARM_UP = """
import asyncio, json, sys
from pydantic import SecretStr
from agentcomms.config import Config, SpeechAccount, STTConfig, VoiceConfig
from agentcomms.voice.stt import local
from agentcomms.voice.warm import warm_speech

grammar, base_url = sys.argv[1:]
deepgram = SpeechAccount(api_key=SecretStr("dg-key"), base_url=base_url)
voice = VoiceConfig(deepgram=deepgram, stt=STTConfig(grammar=grammar))
asyncio.run(warm_speech(Config(voice=voice)))
print(json.dumps({"modules": sorted(sys.modules), "decoders": list(local._decoders)}))
"""


async def test_warming_up_loads_the_configured_providers_and_sends_them_nothing(
    tmp_path: Path,
) -> None:
    deepgram = FakeDeepgram()
    grammar = tmp_path / "answers.gram"
    grammar.write_text("#JSGF V1.0;\ngrammar a;\npublic <a> = yes | no;\n")
    async with deepgram.server:
        # A fresh process: nothing of any SDK loaded before.
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-c", WARM_UP, str(grammar), deepgram.base_url),
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
    assert proc.returncode == 0
    loaded = json.loads(out)
    # Deepgram (both chains) and the local recognizer's model for the grammar; not ElevenLabs
    # or OpenAI, which have no key here and are in no chain.
    assert "deepgram" in loaded["modules"] and "pocketsphinx" in loaded["modules"]
    assert "elevenlabs" not in loaded["modules"] and "openai" not in loaded["modules"]
    assert loaded["decoders"] == [str(grammar)]
    assert deepgram.authorizations == []  # nothing was asked of the provider


async def test_a_call_speaks_and_hears_through_openai(
    temporal_env: WorkflowEnvironment, tmp_path: Path, openai_fake: FakeOpenAIAudio
) -> None:
    openai_fake.transcripts = ["Yes, go ahead."]
    voice = openai_voice(tmp_path, openai_fake)
    async with running_stack(temporal_env.client, tmp_path, voice=voice) as stack:
        phone = Phone(stack)
        first = asyncio.create_task(stack.call("call", agent_id="a", message="Deploy?"))
        call_id = await phone.answer()
        line = await answer_aloud(phone, call_id, "yes go ahead")
        assert line["audio"]["provider"] == "openai"
        assert (await first)["response"] == "Yes, go ahead."
        await stack.call("call_end", call_id=call_id)
    # The seed's defaults name ElevenLabs' voice and Deepgram's model: OpenAI gets its own.
    assert openai_fake.spoken == [
        {"model": "gpt-4o-mini-tts", "voice": "alloy", "input": "Deploy?"}
    ]
    assert openai_fake.heard == [{"model": "whisper-1", "language": "en"}]


async def test_a_failing_provider_falls_back_to_local_speech(
    temporal_env: WorkflowEnvironment, tmp_path: Path, openai_fake: FakeOpenAIAudio
) -> None:
    openai_fake.fail_next(500, 500, 500)  # every retry of the first TTS fails
    voice = openai_voice(tmp_path, openai_fake)
    voice = voice.model_copy(update={"stt": STTConfig(provider="local")})
    async with running_stack(temporal_env.client, tmp_path, voice=voice) as stack:
        phone = Phone(stack)
        first = asyncio.create_task(stack.call("call", agent_id="a", message="Still there?"))
        call_id = await phone.answer()
        line = await phone.reply(call_id, "typed")
        assert line["audio"]["provider"] == "local"
        await first
        await stack.call("call_end", call_id=call_id)


async def test_a_refused_key_goes_straight_to_the_next_provider(
    temporal_env: WorkflowEnvironment, tmp_path: Path, openai_fake: FakeOpenAIAudio
) -> None:
    voice = openai_voice(tmp_path, openai_fake, key="sk-wrong")
    async with running_stack(temporal_env.client, tmp_path, voice=voice) as stack:
        phone = Phone(stack)
        first = asyncio.create_task(stack.call("call", agent_id="a", message="Key?"))
        call_id = await phone.answer()
        line = await answer_aloud(phone, call_id, "no wait")
        assert line["audio"]["provider"] == "local"
        result = await first
        # Local STT heard it (open vocabulary: something, not necessarily these words).
        assert result["status"] == "answered" and result["note"] is None
        await stack.call("call_end", call_id=call_id)
    assert openai_fake.spoken == []
