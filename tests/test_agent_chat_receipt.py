"""The chat receipt ✍ means submitted where the agent's hooks report: a human's Telegram message
typed for a stand-in agent gets its ✍ once the agent's UserPromptSubmit carried it, not before.
Telegram's fake behind the real SDK, a stand-in agent's screen in a real tmux pane, its hooks
through the hook command, a real Temporal mailbox."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, connected
from tests.support.fake_agent import agent_row, start_fake_agent
from tests.support.stack import Stack, register
from tests.support.tmux import Tmux
from tests.support.waiting import eventually


@pytest.fixture
def stack(telegram_stack: Stack) -> Stack:
    return telegram_stack


async def test_the_typed_receipt_waits_for_the_agents_prompt_to_carry_the_message(
    stack: Stack, telegram: FakeTelegram, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    fake = await start_fake_agent(tmux, tmp_path, stack.cfg.server.socket(), "claude")
    await register(stack, agent, tmux, fake.target, submit_delay_ms=0)
    await eventually(lambda: agent_row(stack, agent))
    await fake.hook("SessionStart", source="startup")
    await connected(stack, "telegram")

    update = telegram.human_says(CHAT, "deploy to staging?", first_name="Alice")
    typed = b"[telegram:456 from Alice] deploy to staging?\r"
    await eventually(lambda: fake.typed() == typed)
    await eventually(lambda: len(telegram.reactions) >= 1)
    await asyncio.sleep(0.5)  # a receipt sent on typing would be here by now
    assert [r["emoji"] for r in telegram.reactions] == [["👀"]]  # typed, not yet submitted

    await fake.hook("UserPromptSubmit", prompt="[telegram:456 from Alice] deploy to staging?")
    await eventually(lambda: len(telegram.reactions) == 2)
    assert [r["emoji"] for r in telegram.reactions] == [["👀"], ["✍"]]
    assert {r["message_id"] for r in telegram.reactions} == {update["message"]["message_id"]}
