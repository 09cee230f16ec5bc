"""Strangers writing to the bot cost a bounded number of rows and pairing answers, whatever their
number, on every provider; the allowed human behind them still gets through. The real
python-telegram-bot against the Bot API fake, Twilio's webhooks signed as Twilio signs them, real
Temporal, tmux and SQLite."""

from __future__ import annotations

import time
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from agentcomms.ids import provider_event_id
from gateway.chat.strangers import (
    PAIRING_REPLIES_PER_HOUR,
    STRANGER_ROWS_PER_HOUR,
    STRANGER_ROWS_PER_SENDER,
    STRANGER_TEXT_MAX,
)
from tests.fakes.serve import free_port
from tests.fakes.telegram import FakeTelegram
from tests.fakes.twilio import FakeTwilio
from tests.support.chat import CHAT, STRANGER, Hooks, connected, with_telegram, with_twilio
from tests.support.stack import Stack, register_recorder, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

GROUP = -100_123  # a group mapped to the agent, where Alice and strangers write
UNMAPPED = -100_999  # a group someone added the bot to, mapped to no agent
STRANGERS = 1_000


async def test_a_thousand_strangers_in_a_group_cost_a_bounded_number_of_rows_and_answers(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    agent: str,
    tmux: Tmux,
) -> None:
    channels = {f"telegram:{CHAT}": agent, f"telegram:{GROUP}": agent}
    configure = with_telegram(telegram, agent, channels=channels)
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        pane = await register_recorder(stack, tmux, tmp_path, agent)
        await connected(stack, "telegram")

        for n in range(STRANGERS):
            user = 10_000 + n
            telegram.human_says(GROUP, "x" * 4_000, user_id=user, chat_type="supergroup")
            if n % 10 == 0:
                telegram.human_says(UNMAPPED, "spam", user_id=user, chat_type="group")
        alice = telegram.human_says(GROUP, "deploy", user_id=CHAT, chat_type="supergroup")
        posted = time.monotonic()

        # Alice wrote after all of them, in the same chat: she is typed once they are handled.
        await eventually(
            lambda: pane.read_bytes() == f"[telegram:{GROUP} from Alice] deploy\r".encode(),
            timeout=120,
        )
        print(f"Alice typed {time.monotonic() - posted:.1f} s after {STRANGERS} strangers")
        alice_id = provider_event_id("telegram", GROUP, alice["message"]["message_id"])
        assert (await stack.store.get_event(alice_id)) is not None

        events = await stack.store.events_after(agent, None, 1_000)
        rejected = [e for e in events if e.status == "rejected"]
        assert len(rejected) == STRANGER_ROWS_PER_HOUR
        assert all(len(e.payload["text"]) == STRANGER_TEXT_MAX for e in rejected)
        assert len(telegram.texts_to(GROUP)) == PAIRING_REPLIES_PER_HOUR
        assert len((await stack.call("senders"))["senders"]) <= PAIRING_REPLIES_PER_HOUR + 1
        # The unmapped group is not the operator's: nothing recorded, nothing answered.
        assert await stack.store.events_after("default", None, 1_000) == []
        assert telegram.texts_to(UNMAPPED) == []


async def test_a_stranger_texting_again_and_again_is_recorded_a_few_times_and_answered_once(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio
) -> None:
    stack, hooks = twilio_stack
    answers = []
    for n in range(20):
        answer, _ = await hooks.texts(STRANGER, f"let me in {n}")
        answers.append(answer)
    # Each pairing answer is a billed SMS: one, in the first answer.
    assert ["agentcomms pair " in a for a in answers] == [True] + [False] * 19
    assert twilio.bodies_to(STRANGER) == []
    rows = await stack.store.events_after("default", None, 100)
    assert [e.payload["text"] for e in rows] == [
        f"let me in {n}" for n in range(STRANGER_ROWS_PER_SENDER)
    ]


async def test_a_restarted_gateway_keeps_counting_a_strangers_messages(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio: FakeTwilio, agent: str
) -> None:
    """A stranger who can make the gateway restart (or who waits for one) gets no fresh
    allowance: the hour's counts are in the projection, not the gateway's memory."""
    for turn in range(2):
        port = free_port()
        configure = with_twilio(twilio, agent, port)
        async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
            hooks = Hooks(twilio, port)
            for n in range(STRANGER_ROWS_PER_SENDER - 1):
                answer, _ = await hooks.texts(STRANGER, f"turn {turn} #{n}")
                # Answered with a code once, the first time, whichever gateway took it.
                assert ("agentcomms pair " in answer) == (turn == 0 and n == 0)
            rows = await stack.store.events_after("default", None, 100)
    assert len(rows) == STRANGER_ROWS_PER_SENDER
    assert [e.payload["text"] for e in rows][-1] == "turn 1 #0"
