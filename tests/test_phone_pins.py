"""A PIN guessed across calls (Twilio's stand-in phone network, the gateway's real webhooks, the
projection on a real SQLite file): each call gets one try, but wrong PINs are counted by the
caller's number, so the third in a row locks the number out; its calls are told so without a
PIN prompt, the right PIN is refused too while it lasts, the human is told in their chat and
their inbox, and once it is over the right PIN lets the caller in again. The count outlives a
gateway restart, and a call asked for its PIN before the lockout began is refused by it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, VoiceConfig
from agentcomms.config.voice import InboundConfig
from agentcomms.models import utcnow
from agentcomms.voice.audio import AudioStore
from tests.fakes.serve import free_port
from tests.fakes.telegram import FakeTelegram
from tests.fakes.twilio_calls import FakeCall, FakeTwilioCalls, Press
from tests.support.chat import CHAT, with_telegram
from tests.support.hooks import listed_approval, open_approval
from tests.support.stack import Stack, running_stack
from tests.support.voice import listening, twilio_phone
from tests.support.waiting import eventually

HUMAN = "+15557654321"
PIN = "2468"
ASKED = "Enter your PIN, then press the pound key."
LOCKED = "Too many wrong PINs from this number. Call again in 1 minute. Goodbye."
# Short enough to wait out in a test, long enough for the calls made while it lasts.
LOCKOUT_S = 4.0


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    twilio_voice: FakeTwilioCalls,
    telegram: FakeTelegram,
    agent: str,
) -> AsyncIterator[Stack]:
    voice = VoiceConfig(
        audio_dir=tmp_path / "audio",
        phone=twilio_phone(twilio_voice, HUMAN),
        inbound=InboundConfig(
            allowed_callers=[HUMAN], pin=SecretStr(PIN), pin_tries=3, pin_lockout_s=LOCKOUT_S
        ),
    )
    port = free_port()
    telegram.known_chats.add(CHAT)  # the human has written to the bot before

    def configure(cfg: Config) -> Config:
        return with_telegram(telegram, agent)(listening(cfg, port))

    async with running_stack(temporal_env.client, tmp_path, voice=voice, configure=configure) as s:
        yield s


async def _call_in(stack: Stack, twilio_voice: FakeTwilioCalls, pin: str) -> list[str]:
    """A call from the human's number keying `pin` (then 1, to hear the requests): what the
    menu said to it."""
    url = f"{stack.cfg.server.public_url}/webhooks/twilio/voice"
    call: FakeCall = await twilio_voice.incoming(HUMAN, url, [Press(pin), Press("1")])
    turns = AudioStore(stack.cfg.voice.audio_root()).transcript(call.sid)
    return [t.text for t in turns if t.speaker == "menu"]


async def test_a_pin_guessed_across_calls_locks_the_number_out_for_a_while(
    stack: Stack, twilio_voice: FakeTwilioCalls, telegram: FakeTelegram, agent: str
) -> None:
    approval = await listed_approval(stack, await open_approval(stack, agent, command="make"))
    for guess in ("1111", "2222"):
        assert await _call_in(stack, twilio_voice, guess) == [ASKED, "Goodbye."]
    assert not any("PIN" in t for t in telegram.texts_to(CHAT))

    # The third wrong PIN in a row, on a call of its own, locks the number out.
    assert await _call_in(stack, twilio_voice, "3333") == [ASKED, LOCKED]
    told = "Phone: 3 wrong PINs in a row from +15557654321, so calls from it are refused until"
    assert any(t.startswith(told) for t in telegram.texts_to(CHAT))
    inbox = (await stack.call("inbox"))["messages"]
    assert any(m["payload"]["text"].startswith(told) for m in inbox)

    # While it lasts, the right PIN is not even asked for: nothing is heard, nothing answered.
    assert await _call_in(stack, twilio_voice, PIN) == [LOCKED]
    assert (await stack.call("approval_wait", id=approval, wait_s=0.2))["status"] == "open"
    refusals = [
        e.error or ""
        for e in await stack.store.latest_events("default", 20)
        if e.channel_id == f"phone:{HUMAN}" and e.status == "rejected"
    ]
    assert len(refusals) == 4 and "locked out after wrong PINs until" in refusals[0]
    assert len([t for t in telegram.texts_to(CHAT) if t.startswith(told)]) == 1  # told once

    # Once it is over, the right PIN lets the caller in again.
    async def over() -> bool:
        return await stack.store.pin_locked_until(HUMAN, utcnow()) is None

    await eventually(over, timeout=LOCKOUT_S + 10)
    said = await _call_in(stack, twilio_voice, PIN)
    assert said[0] == ASKED and said[1].startswith("1 request waiting for you.")


async def test_the_count_outlives_a_restart_and_locks_out_a_call_already_asked(
    stack: Stack,
) -> None:
    menu = stack.gateway.phone_menu
    asked = await menu.start("CA-asked-first", HUMAN)
    assert asked.words == ASKED
    for n in (1, 2):
        await stack.gateway.phone_menu.start(f"CA-{n}", HUMAN)
        assert (await stack.gateway.phone_menu.answer(f"CA-{n}", "pin", "9999")).words == (
            "Goodbye."
        )
    await stack.restart_gateway()  # the count is the projection's, not the gateway's memory
    await stack.gateway.phone_menu.start("CA-3", HUMAN)
    assert (await stack.gateway.phone_menu.answer("CA-3", "pin", "9999")).words == LOCKED
    # The call asked before the lockout keys the right PIN: refused all the same.
    answered = await stack.gateway.phone_menu.answer("CA-asked-first", "pin", PIN)
    assert (answered.words, answered.expect) == (LOCKED, "end")
    assert await stack.store.caller("CA-asked-first") is None
