"""An agent that crashes to its shell, with no SessionEnd, is found offline once its state is
stale: its messages wait, nothing reaches the shell, and they are typed once when it is back.
A stand-in agent run as a person's terminal runs one (`sh -c "agent; exec sh"`), a real tmux
pane, its hooks through the hook command, a real Temporal mailbox."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.fake_agent import PROMPT, registered, start_fake_agent, state_is
from tests.support.stack import Stack, register
from tests.support.tmux import Tmux, as_sent, wait_for_command
from tests.support.waiting import eventually

QUIET_S = 1.5


@pytest.mark.timeout(120)
async def test_an_agent_that_crashed_to_its_shell_is_offline_and_its_messages_wait(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent_id = stack.agent_id("claude")
    fake = await start_fake_agent(
        tmux, tmp_path, stack.cfg.server.socket(), "claude", shell_after=True
    )
    await register(stack, agent_id, tmux, fake.target, submit_delay_ms=0)
    # The gateway finds a hook's agent among the registrations the projection shows (the look
    # at registration may find it at its prompt already).
    await eventually(lambda: registered(stack, agent_id))
    await fake.hook("SessionStart", source="startup")
    await eventually(lambda: state_is(stack, agent_id, "ready"))

    # Working on a turn, the agent dies: the shell that started it is all the pane has left.
    await fake.hook("UserPromptSubmit", prompt="work")
    await eventually(lambda: state_is(stack, agent_id, "busy"))
    fake.crash()
    await wait_for_command(tmux, fake.target, "sh")  # `exec sh`: the shell left behind
    sent = await stack.call("send", agent_id=agent_id, message="echo typed into the shell")
    # Once the state is stale the pane is looked at: a shell with nothing under it.
    await eventually(lambda: state_is(stack, agent_id, "offline"), timeout=40)
    await asyncio.sleep(QUIET_S)
    assert "typed into the shell" not in tmux.capture(fake.target)
    assert fake.typed() == b""
    traced = await stack.call("trace", event_id=sent["event_id"])
    assert any(f"{agent_id} is offline" in why for why in traced["why"]), traced

    # The human starts the agent again and registers it: the look at registration finds it at
    # its prompt (its SessionStart went out before the registration, to no one).
    fake.restart()
    await fake.showing("(started again)\n" + PROMPT)
    await register(stack, agent_id, tmux, fake.target, submit_delay_ms=0)
    await eventually(lambda: fake.typed() == as_sent("echo typed into the shell"))
    await asyncio.sleep(QUIET_S)
    assert fake.typed() == as_sent("echo typed into the shell")  # once
