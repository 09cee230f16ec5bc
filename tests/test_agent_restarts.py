"""The agent's state and the messages that wait for it outlive the processes around them: the
gateway restarted while the agent's hooks report, the worker killed while a message waits for
the agent to be ready. A stand-in agent's screen in a real tmux pane, its hooks through the
hook command, a real Temporal mailbox, a real worker process."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.client import GatewayClient
from gateway.service import Gateway
from tests.support.cli import AGENTCOMMS
from tests.support.fake_agent import (
    BUSY,
    PROMPT,
    FakeAgent,
    registered,
    start_fake_agent,
    state_is,
)
from tests.support.hosts import worker_process
from tests.support.stack import Stack, register, running_stack
from tests.support.tmux import Tmux, as_sent
from tests.support.waiting import eventually

# Long enough for a message that was going to be typed to have been.
QUIET_S = 1.5


async def busy_agent(stack: Stack, tmux: Tmux, tmp_path: Path) -> tuple[str, FakeAgent]:
    """A stand-in agent, registered, its hooks saying it works on a turn, its pane agreeing."""
    agent_id = stack.agent_id("claude")
    fake = await start_fake_agent(tmux, tmp_path, stack.cfg.server.socket(), "claude")
    await register(stack, agent_id, tmux, fake.target, submit_delay_ms=0)
    await eventually(lambda: registered(stack, agent_id))
    await fake.hook("SessionStart", source="startup")
    await fake.showing(BUSY)
    await fake.hook("UserPromptSubmit", prompt="work")
    await eventually(lambda: state_is(stack, agent_id, "busy"))
    return agent_id, fake


@pytest.mark.timeout(120)
async def test_the_gateway_restarted_while_hooks_report_loses_neither_state_nor_message(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent_id, fake = await busy_agent(stack, tmux, tmp_path)
    sent = await stack.call("send", agent_id=agent_id, message="after the restart")

    await stack.rpc.close()
    await stack.gateway.close()
    # A hook while the gateway is down: silent, exit 0, and the agent goes on.
    await fake.hook_process(
        "PreToolUse", AGENTCOMMS, tool_name="Bash", tool_input={"command": "ls"}
    )
    gateway = Gateway(stack.cfg, stack.client, stack.store, host=stack.host)
    await gateway.start()
    rpc = GatewayClient(stack.cfg.server.socket())
    await rpc.connect()
    stack.gateway, stack.rpc = gateway, rpc
    try:
        # The state lives in the mailbox: still busy, the message still waits for the turn.
        await eventually(lambda: state_is(stack, agent_id, "busy"))
        traced = await stack.call("trace", event_id=sent["event_id"])
        assert any(f"{agent_id} is busy" in why for why in traced["why"]), traced
        assert traced["waiting"]["position"] == 1
        await asyncio.sleep(QUIET_S)
        assert fake.typed() == b""

        # The new gateway finds the hook's agent by its pane, and the turn's end types it.
        await fake.showing(PROMPT)
        await fake.hook_process("Stop", AGENTCOMMS, last_assistant_message="done")
        await eventually(lambda: fake.typed() == as_sent("after the restart"))
        await asyncio.sleep(QUIET_S)
        assert fake.typed() == as_sent("after the restart")
    finally:
        await rpc.close()
        await gateway.close()


@pytest.mark.timeout(150)
async def test_a_worker_killed_while_a_message_waits_for_readiness_types_it_once(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    host = f"killed-{uuid.uuid4().hex[:8]}"
    async with running_stack(temporal_env.client, tmp_path, with_worker=False, host=host) as stack:
        worker = await worker_process(stack, host, tmp_path / "worker-home")
        replacement = None
        try:
            agent_id, fake = await busy_agent(stack, tmux, tmp_path)
            await stack.call("send", agent_id=agent_id, message="typed once")
            await asyncio.sleep(QUIET_S)
            assert fake.typed() == b""  # it waits for the turn to end

            worker.send_signal(signal.SIGKILL)
            await worker.wait()
            replacement = await worker_process(stack, host, tmp_path / "worker-home")
            await fake.showing(PROMPT)
            await fake.hook("Stop")
            await eventually(lambda: fake.typed() == as_sent("typed once"), timeout=60)
            await asyncio.sleep(QUIET_S)
            assert fake.typed() == as_sent("typed once")
            await eventually(lambda: state_is(stack, agent_id, "busy"))  # typed: its turn now
        finally:
            for proc in (worker, replacement):
                if proc is not None and proc.returncode is None:
                    proc.kill()
                    await proc.wait()
