"""Calls through Twilio, against a fake Twilio that behaves like its phone network (signed status
callbacks, our TwiML carried out, our audio downloaded and checked, recordings for answers),
driven by the real `twilio` SDK; the gateway's webhooks on its real HTTP listener."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, SecurityConfig, STTConfig, VoiceConfig
from agentcomms.voice.callsystem.twilio import MediaSigner
from gateway.service import Gateway
from tests.fakes.serve import free_port
from tests.fakes.twilio import OUR_NUMBER
from tests.fakes.twilio_calls import FakeTwilioCalls
from tests.support.stack import Stack, running_stack
from tests.support.voice import listening, twilio_phone, write_grammar
from tests.support.waiting import eventually

HUMAN = "+15557654321"


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio_voice: FakeTwilioCalls
) -> AsyncIterator[Stack]:
    grammar = write_grammar(tmp_path / "answers.gram")
    voice = VoiceConfig(
        audio_dir=tmp_path / "audio",
        ring_timeout_s=2,
        phone=twilio_phone(twilio_voice, HUMAN),
        stt=STTConfig(provider="local", grammar=grammar),
    )
    port = free_port()

    def listen(cfg: Config) -> Config:
        return listening(cfg, port)

    async with running_stack(temporal_env.client, tmp_path, voice=voice, configure=listen) as s:
        yield s


def only_call(twilio_voice: FakeTwilioCalls) -> Any:
    [call] = twilio_voice.calls.values()
    return call


async def test_a_call_of_several_turns_through_twilio(
    stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    twilio_voice.answers = ["yes go ahead", "no wait"]
    first = await stack.call("call", agent_id="ops", message="Shall I deploy?")
    # The human's recording came back through the webhook and pocketsphinx heard it.
    assert first["response"] == "yes go ahead" and first["status"] == "answered"
    call_id = first["call_id"]
    second = await stack.call("call_say", call_id=call_id, message="Right now?")
    assert second["response"] == "no wait"
    spoken = await stack.call("call_say", call_id=call_id, message="Holding.", listen=False)
    assert spoken["success"] is True and spoken["status"] == "played"
    ended = await stack.call("call_end", call_id=call_id, message="Goodbye.")
    assert ended["status"] == "completed" and ended["duration_seconds"] > 0
    call = only_call(twilio_voice)
    await asyncio.wait_for(call.done.wait(), 20)
    assert twilio_voice.problems == []
    assert call.to == HUMAN and call.from_ == OUR_NUMBER
    # Each turn's words were fetched under a signed URL and were WAV audio: four turns.
    assert len(call.played) == 4
    assert all("/voice/media/" in url and "sig=" in url for url in call.played)
    assert call.statuses[:2] == ["initiated", "ringing"] and call.statuses[-1] == "completed"
    row = await eventually(lambda: stack.store.get_call(call_id))
    assert row.phone_number == HUMAN


async def test_the_human_hangs_up_mid_call(stack: Stack, twilio_voice: FakeTwilioCalls) -> None:
    twilio_voice.answers = ["ship it on friday", None]
    first = await stack.call("call", agent_id="ops", message="When?")
    assert first["response"] == "ship it on friday"
    second = await stack.call("call_say", call_id=first["call_id"], message="Sure?")
    assert second["status"] == "hung-up" and "the human hung up" in second["note"]


async def test_no_answer_leaves_the_message_in_the_inbox(
    stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    twilio_voice.scenario = "no-answer"
    result = await stack.call("call", agent_id="ops", message="Disk almost full.")
    assert result["status"] == "no-answer" and "inbox" in result["note"]
    [message] = (await stack.call("inbox"))["messages"]
    assert message["payload"]["text"].endswith("Here's my message: Disk almost full.")


async def test_an_answering_machine_gets_a_voicemail(
    stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    twilio_voice.scenario = "machine"
    result = await stack.call("call", agent_id="ops", message="Backup failed.")
    assert result["status"] == "voicemail" and "answering machine" in result["note"]
    call = only_call(twilio_voice)
    await asyncio.wait_for(call.done.wait(), 20)
    assert len(call.played) == 1 and twilio_voice.problems == []  # the message, as a voicemail
    [message] = (await stack.call("inbox"))["messages"]  # and sent another way too
    assert message["payload"]["text"].endswith("Backup failed.")


async def test_a_busy_line(stack: Stack, twilio_voice: FakeTwilioCalls) -> None:
    twilio_voice.scenario = "busy"
    result = await stack.call("call", agent_id="ops", message="Ping")
    assert result["status"] == "busy"


async def test_forged_webhooks_are_refused(stack: Stack, twilio_voice: FakeTwilioCalls) -> None:
    public = stack.cfg.server.public_url
    assert public is not None
    form = {"AccountSid": twilio_voice.account_sid, "CallSid": "CA1", "CallStatus": "completed"}
    url = f"{public}/voice/twilio/c_{'0' * 26}/status"
    async with httpx.AsyncClient() as client:
        unsigned = await client.post(url, data=form)
        forged = await client.post(url, data=form, headers={"X-Twilio-Signature": "AAAA"})
        from twilio.request_validator import RequestValidator

        elsewhere = RequestValidator(twilio_voice.auth_token).compute_signature(url + "x", form)
        replayed = await client.post(url, data=form, headers={"X-Twilio-Signature": elsewhere})
    assert [r.status_code for r in (unsigned, forged, replayed)] == [403, 403, 403]


async def test_media_urls_expire_and_cannot_be_forged(
    stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    twilio_voice.answers = ["yes go ahead"]
    first = await stack.call("call", agent_id="ops", message="Check the media.")
    await stack.call("call_end", call_id=first["call_id"])
    [url] = only_call(twilio_voice).played
    async with httpx.AsyncClient() as client:
        assert (await client.get(url)).status_code == 200
        forged = url.replace("sig=", "sig=0")
        assert (await client.get(forged)).status_code == 403
        other = url.replace("001-agent.wav", "002-agent.wav")
        assert (await client.get(other)).status_code == 403
    signer = MediaSigner(b"k" * 32, ttl_s=60)
    signed = signer.url("http://x", "c_1/001-agent.wav", now=1000.0)
    query = dict(part.split("=") for part in signed.split("?")[1].split("&"))
    assert signer.check("c_1/001-agent.wav", query["exp"], query["sig"], now=1059.0)
    assert not signer.check("c_1/001-agent.wav", query["exp"], query["sig"], now=1061.0)


async def test_media_urls_outlive_a_gateway_restart(
    stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    """Twilio may fetch a turn's audio after the gateway restarted (or from another gateway of
    the deployment): the URL's key comes from the deployment's key, not from the process."""
    twilio_voice.answers = ["yes go ahead"]
    first = await stack.call("call", agent_id="ops", message="Check the media.")
    await stack.call("call_end", call_id=first["call_id"])
    [url] = only_call(twilio_voice).played
    path, _, query_string = url.partition("?")
    name = path.split("/voice/media/", 1)[1]
    query = dict(part.split("=") for part in query_string.split("&"))
    restarted = Gateway(stack.cfg, stack.client, stack.store)
    assert restarted.media_signer().check(name, query["exp"], query["sig"])
    other_deployment = stack.cfg.model_copy(
        update={
            "security": SecurityConfig(
                deployment_key=SecretStr("another deployment's key, thirty-two or more")
            )
        }
    )
    stranger = Gateway(other_deployment, stack.client, stack.store)
    assert not stranger.media_signer().check(name, query["exp"], query["sig"])
