"""The agent's reply comes back: a stand-in agent's hooks (through the hook command, from its
real tmux pane) report a turn that a Telegram message started and its last words, which go to
that chat as an answer to the human's message, once; a turn the chat did not start, or one in
which the agent wrote to the chat itself, sends nothing. Then the real Claude Code, with
agentcomms installed, answers a Telegram message and its answer comes back."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import AgentConfig, Config
from gateway.mirror import SMS_FIRST_PART, SMS_THE_REST
from tests.fakes.anthropic import text
from tests.fakes.serve import free_port
from tests.fakes.telegram import FakeTelegram
from tests.fakes.twilio import FakeTwilio
from tests.support.agents import claude_with_agentcomms
from tests.support.chat import ALICE, CHAT, Hooks, connected, with_telegram, with_twilio
from tests.support.fake_agent import FakeAgent, registered, start_fake_agent, state_is
from tests.support.stack import Stack, register, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually


@pytest.fixture
async def stack(telegram_stack: Stack, telegram: FakeTelegram) -> Stack:
    telegram.known_chats.add(CHAT)
    await connected(telegram_stack, "telegram")
    return telegram_stack


@pytest.fixture
async def fake(stack: Stack, tmux: Tmux, tmp_path: Path, agent: str) -> FakeAgent:
    return await _ready(stack, tmux, tmp_path, agent)


async def _ready(stack: Stack, tmux: Tmux, root: Path, agent: str) -> FakeAgent:
    """A stand-in agent in a pane, registered as `agent`, its state ready."""
    fake = await start_fake_agent(tmux, root, stack.cfg.server.socket(), "claude")
    await register(stack, agent, tmux, fake.target, submit_delay_ms=0)
    await eventually(lambda: registered(stack, agent))
    await fake.hook("SessionStart", source="startup")
    await eventually(lambda: state_is(stack, agent, "ready"))
    return fake


async def _asks(stack: Stack, telegram: FakeTelegram, agent: str, text: str) -> dict[str, Any]:
    """Alice writes in Telegram; once the gateway kept it, the human's message."""
    update = telegram.human_says(CHAT, text)
    message: dict[str, Any] = update["message"]
    await eventually(lambda: stack.store.channel_history(f"telegram:{CHAT}", 10, agent_id=agent))
    return message


def _replies(telegram: FakeTelegram, text: str) -> list[dict[str, Any]]:
    return [m for m in telegram.sent if m["text"] == text]


async def test_the_turns_last_words_answer_the_chat_that_started_it_once(
    stack: Stack, telegram: FakeTelegram, fake: FakeAgent, agent: str
) -> None:
    asked = await _asks(stack, telegram, agent, "what is 2+2?")
    await fake.hook("UserPromptSubmit", prompt=f"[telegram:{CHAT} from Alice] what is 2+2?")
    await fake.hook("Stop", last_assistant_message="It is 4.")
    [reply] = await eventually(lambda: _replies(telegram, "It is 4.") or None)
    assert reply["chat"]["id"] == CHAT
    assert reply["reply_to_message_id"] == asked["message_id"]
    await fake.hook("Stop", last_assistant_message="It is 4.")  # the hook fires twice
    # A turn started at the terminal is not mirrored.
    await fake.hook("UserPromptSubmit", prompt="tidy up the logs")
    await fake.hook("Stop", last_assistant_message="Tidied.")
    # A turn in which the agent wrote to the chat itself is not mirrored either.
    await _asks(stack, telegram, agent, "and 3+3?")
    await fake.hook("UserPromptSubmit", prompt=f"[telegram:{CHAT} from Alice] and 3+3?")
    await stack.call("reply", channel_id=f"telegram:{CHAT}", message="Six.", agent_id=agent)
    await fake.hook("Stop", last_assistant_message="I told Alice: six.")
    # The last turn's own message arrived; nothing mirrored went before or after it.
    await eventually(lambda: _replies(telegram, "Six.") or None)
    await fake.hook("UserPromptSubmit", prompt=f"[telegram:{CHAT} from Alice] and 3+3?")
    await fake.hook("Stop", last_assistant_message="Last.")
    await eventually(lambda: _replies(telegram, "Last.") or None)
    assert len(_replies(telegram, "It is 4.")) == 1
    assert _replies(telegram, "Tidied.") == _replies(telegram, "I told Alice: six.") == []


async def test_a_turn_that_ends_in_an_error_tells_the_chat_in_one_line(
    stack: Stack, telegram: FakeTelegram, fake: FakeAgent, agent: str
) -> None:
    asked = await _asks(stack, telegram, agent, "summarise the logs")
    await fake.hook("UserPromptSubmit", prompt=f"[telegram:{CHAT} from Alice] summarise the logs")
    await fake.hook("StopFailure", error="rate_limit", error_details="429: try again\nin a minute")
    told = "The agent's turn stopped on an error: rate_limit (429: try again in a minute)"
    [reply] = await eventually(lambda: _replies(telegram, told) or None)
    assert reply["reply_to_message_id"] == asked["message_id"]


@pytest.mark.parametrize("mode", ["all", "off"])
async def test_mirror_all_sends_every_turn_and_off_none(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    tmux: Tmux,
    agent: str,
    mode: Literal["all", "off"],
) -> None:
    telegram.known_chats.add(CHAT)
    # The agent in the config, as a user writes it: its pane and its mirror.
    fake = await start_fake_agent(tmux, tmp_path, tmp_path / "daemon.sock", "claude")
    pane = AgentConfig(target=fake.target, socket=tmux.socket, submit_delay_ms=0, mirror=mode)

    def configure(cfg: Config) -> Config:
        cfg = with_telegram(telegram, agent)(cfg)
        return cfg.model_copy(update={"agents": {agent: pane}})

    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        assert stack.cfg.server.socket() == tmp_path / "daemon.sock"
        await connected(stack, "telegram")
        await eventually(lambda: registered(stack, agent))
        await fake.hook("SessionStart", source="startup")
        await eventually(lambda: state_is(stack, agent, "ready"))
        await fake.hook("UserPromptSubmit", prompt="tidy up the logs")
        await fake.hook("Stop", last_assistant_message="Tidied.")
        await _asks(stack, telegram, agent, "what is 2+2?")
        await fake.hook("UserPromptSubmit", prompt=f"[telegram:{CHAT} from Alice] what is 2+2?")
        await fake.hook("Stop", last_assistant_message="It is 4.")
        await stack.call(
            "reply", channel_id=f"telegram:{CHAT}", message="Sentinel.", agent_id=agent
        )
        await eventually(lambda: _replies(telegram, "Sentinel.") or None)
    mirrored = [m for m in telegram.sent if m["text"] in ("Tidied.", "It is 4.")]
    if mode == "off":
        assert mirrored == []
    else:  # the terminal's turn to the agent's chat as it is, the chat's as an answer
        assert [(m["text"], "reply_to_message_id" in m) for m in mirrored] == [
            ("Tidied.", False),
            ("It is 4.", True),
        ]


@pytest.mark.usefixtures("agent_clis")
async def test_the_real_claude_codes_answer_to_a_telegram_message_comes_back(
    temporal_env: WorkflowEnvironment,
    tmux_socket_dir: Path,
    tmp_path: Path,
    telegram: FakeTelegram,
    agent: str,
) -> None:
    telegram.known_chats.add(CHAT)
    server = Tmux(tmux_socket_dir / f"m-{agent[-8:]}")
    async with claude_with_agentcomms(
        temporal_env.client,
        tmp_path,
        server,
        agent_id=agent,
        configure=with_telegram(telegram, agent),
    ) as (stack, claude, _):
        await connected(stack, "telegram")
        await claude.wait_ready()
        claude.model.on("two plus two", text("It is 4."))
        asked = telegram.human_says(CHAT, "what is two plus two?\nbe brief")
        [reply] = await eventually(lambda: _replies(telegram, "It is 4.") or None, timeout=60)
    assert reply["reply_to_message_id"] == asked["message"]["message_id"]


async def test_a_long_reply_by_sms_sends_its_start_and_where_the_rest_is(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio: FakeTwilio, tmux: Tmux, agent: str
) -> None:
    port = free_port()
    configure = with_twilio(twilio, agent, port)
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        fake = await _ready(stack, tmux, tmp_path, agent)
        await Hooks(twilio, port).texts(ALICE, "status?")
        await eventually(lambda: stack.store.channel_history(f"sms:{ALICE}", 10, agent_id=agent))
        reply = "All green. " + "Details follow. " * 150  # 2,411 characters
        await fake.hook("UserPromptSubmit", prompt=f"[sms:{ALICE} from {ALICE}] status?")
        await fake.hook("Stop", last_assistant_message=reply)

        [sent] = await eventually(
            lambda: [b for b in twilio.bodies_to(ALICE) if b.startswith("All green.")] or None
        )
        assert sent == reply[:SMS_FIRST_PART].rstrip() + SMS_THE_REST
        # The whole reply is kept where the message says it is.
        history = await stack.store.channel_history(f"sms:{ALICE}", 10, agent_id=agent)
        [kept] = [e for e in history if e.direction == "out" and e.payload.get("mirrored")]
        assert kept.payload["text"] == reply
