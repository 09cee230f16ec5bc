"""A permission request's call rung through Twilio (the stand-in phone network, the gateway's real
webhooks): the call says what the agent wants, and a key pressed (Twilio's <Gather>) or a word
said (the STT chain) decides the request through the gateway, via "call"."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, STTConfig, VoiceConfig
from agentcomms.escalation_models import Rung
from tests.fakes.serve import free_port
from tests.fakes.twilio_calls import FakeCall, FakeTwilioCalls, Press
from tests.support.stack import Stack, running_stack
from tests.support.voice import listening, twilio_phone, write_grammar
from tests.support.waiting import eventually

HUMAN = "+15557654321"


@pytest.fixture
async def twilio() -> AsyncIterator[FakeTwilioCalls]:
    fake = FakeTwilioCalls()
    await fake.server.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio: FakeTwilioCalls
) -> AsyncIterator[Stack]:
    voice = VoiceConfig(
        audio_dir=tmp_path / "audio",
        ring_timeout_s=5,
        transcript_timeout_s=20,
        phone=twilio_phone(twilio, HUMAN),
        stt=STTConfig(
            provider="local", grammar=write_grammar(tmp_path / "answers.gram", ["allow", "deny"])
        ),
    )
    port = free_port()

    def configure(cfg: Config) -> Config:
        cfg = listening(cfg, port)
        # Straight to the phone: the ladder's one rung is a call.
        return cfg.model_copy(update={"escalation": [Rung(after_s=0, via="call")]})

    async with running_stack(temporal_env.client, tmp_path, voice=voice, configure=configure) as s:
        yield s


async def _ask(stack: Stack) -> str:
    opened = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id="backend",
        tool_name="Bash",
        tool_input={"command": "rm -rf build"},
    )
    return str(opened["id"])


async def _decided(stack: Stack, approval: str) -> dict[str, Any]:
    async def decided() -> dict[str, Any] | None:
        waited: dict[str, Any] = await stack.call("approval_wait", id=approval, wait_s=5)
        return waited if waited["status"] == "decided" else None

    return await eventually(decided, timeout=60)


async def _ended(twilio: FakeTwilioCalls) -> FakeCall:
    async def ended() -> FakeCall | None:
        calls = list(twilio.calls.values())
        return calls[0] if len(calls) == 1 and calls[0].done.is_set() else None

    return await eventually(ended, timeout=60)


async def test_pressing_2_denies_the_request(stack: Stack, twilio: FakeTwilioCalls) -> None:
    twilio.answers = [Press("2")]
    approval = await _ask(stack)
    waited = await _decided(stack, approval)
    assert (waited["behavior"], waited["decided_via"], waited["decided_by"]) == (
        "deny",
        "call",
        HUMAN,
    )
    assert waited["decision"]["behavior"] == "deny"
    call = await _ended(twilio)
    assert call.to == HUMAN
    assert '<Gather input="dtmf" numDigits="1"' in call.twiml[0]
    assert twilio.problems == []
    traced = await stack.call("trace", event_id=approval)
    assert [s["step"] for s in traced["steps"]] == ["opened", "rung 1: call", "answer"]
    assert traced["status"] == f"denied by {HUMAN} on a phone call"


async def test_3_says_it_again_and_1_allows(stack: Stack, twilio: FakeTwilioCalls) -> None:
    twilio.answers = [Press("3"), Press("1")]
    approval = await _ask(stack)
    waited = await _decided(stack, approval)
    assert (waited["behavior"], waited["decided_via"]) == ("allow", "call")
    call = await _ended(twilio)
    # The request was played twice (its words as audio, or said), each time with the keys.
    assert sum("<Gather" in doc for doc in call.twiml) == 2


async def test_the_spoken_answer_is_heard(stack: Stack, twilio: FakeTwilioCalls) -> None:
    twilio.answers = ["deny"]
    approval = await _ask(stack)
    waited = await _decided(stack, approval)
    assert (waited["behavior"], waited["decided_via"]) == ("deny", "call")


async def test_a_forged_key_press_is_refused(stack: Stack, twilio: FakeTwilioCalls) -> None:
    import httpx

    url = f"{stack.cfg.server.public_url}/voice/twilio/c_X/digits?turn=1"
    async with httpx.AsyncClient() as client:
        response = await client.post(url, data={"Digits": "1", "AccountSid": twilio.account_sid})
    assert response.status_code == 403
