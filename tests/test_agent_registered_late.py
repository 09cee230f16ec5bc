"""A pane registered after its agent started has had its SessionStart already: one look at the
pane, as it is registered, says the agent is at its prompt. A plain shell shows no agent's
input box and stays unknown. Stand-in agents in real tmux panes, a real Temporal mailbox."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.fake_agent import agent_row, start_fake_agent, state_is
from tests.support.stack import Stack, register
from tests.support.tmux import SENT_HEADER, Tmux, as_sent, wait_for_command
from tests.support.waiting import eventually


async def test_an_agent_at_its_prompt_registered_late_is_ready_without_a_hook(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent_id = stack.agent_id("claude")
    fake = await start_fake_agent(tmux, tmp_path, stack.cfg.server.socket(), "claude")
    await register(stack, agent_id, tmux, fake.target, submit_delay_ms=0)
    row = await eventually(lambda: state_is(stack, agent_id, "ready"))
    assert row["waiting_for"] is None
    # Known now: a message typed is followed until the agent's prompt carries it.
    sending = asyncio.create_task(
        stack.call("send", agent_id=agent_id, message="hello", wait=True, timeout=30)
    )
    await eventually(lambda: fake.typed() == as_sent("hello"))
    await fake.hook("UserPromptSubmit", prompt=f"{SENT_HEADER}hello")
    assert (await sending)["status"] == "submitted"


async def test_a_plain_shell_registered_stays_unknown(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent_id = stack.agent_id("shell")
    target = tmux.new_session("shell")
    await wait_for_command(tmux, target, "sh")
    await register(stack, agent_id, tmux, target, submit_delay_ms=0)
    await eventually(lambda: agent_row(stack, agent_id))
    await asyncio.sleep(1)
    row = await agent_row(stack, agent_id)
    assert row is not None and row["state"] == "unknown"
