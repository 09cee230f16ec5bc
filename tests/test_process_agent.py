"""A process agent end to end through one stack: started by the gateway's `start_agent`, run
by the host's worker, its messages prompted over ACP (the project's scripted ACP agent, a real
process), its state exact, an interrupt a `session/cancel`, a death mid-turn survived with its
session loaded, and `stop_agent` ending it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.framing import pane_text
from agentcomms.models import Agent
from tests.support import acp_agent
from tests.support.acp_agent import log_of
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually

SCRIPTED = [sys.executable, acp_agent.__file__]


@pytest.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    async with running_stack(temporal_env.client, tmp_path_factory.mktemp("stack")) as s:
        yield s


async def started(stack: Stack, tmp_path: Path, name: str) -> str:
    agent = stack.agent_id(name)
    result = await stack.call("start_agent", agent_id=agent, dir=str(tmp_path), command=SCRIPTED)
    assert result["started"] and result["host"] == stack.host
    await eventually(lambda: state_is(stack, agent, "ready"), timeout=30)
    return agent


async def state_is(stack: Stack, agent: str, state: str) -> Agent | None:
    row = await stack.store.get_agent(agent)
    return row if row is not None and row.state == state else None


async def waiting(stack: Stack, agent: str, count: int) -> bool:
    snapshot = await stack.gateway.mailbox.snapshot(agent)
    return snapshot is not None and snapshot.pending == count


def prompts(folder: Path) -> list[str]:
    return [e["prompt"] for e in log_of(folder) if "prompt" in e]


async def send(stack: Stack, agent: str, text: str, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = await stack.call("send", agent_id=agent, message=text, **extra)
    return result


async def test_a_message_is_one_prompt_with_its_header_and_send_wait_answers_submitted(
    stack: Stack, tmp_path: Path
) -> None:
    agent = await started(stack, tmp_path, "acp")
    row = await stack.store.get_agent(agent)
    assert row is not None and row.type == "process" and row.target is not None
    assert row.target.startswith("acp: ") and row.status == "online"

    result = await send(stack, agent, "hello over ACP", wait=True, timeout=30)
    assert result["status"] == "submitted", result
    event = await stack.store.get_event(result["event_id"])
    assert event is not None and event.status == "delivered"
    assert prompts(tmp_path) == [pane_text(event)]  # the header a pane would show, then the text
    await eventually(lambda: state_is(stack, agent, "ready"))


async def test_messages_wait_while_busy_go_as_one_prompt_and_an_interrupt_cancels(
    stack: Stack, tmp_path: Path
) -> None:
    agent = await started(stack, tmp_path, "acp-busy")
    await send(stack, agent, "acp:hang", wait=True, timeout=30)
    await eventually(lambda: state_is(stack, agent, "busy"))
    await eventually(lambda: len(prompts(tmp_path)) == 1)
    await send(stack, agent, "first waiting")
    await send(stack, agent, "second waiting")
    await eventually(lambda: waiting(stack, agent, 2))
    assert len(prompts(tmp_path)) == 1  # nothing is prompted into a running turn

    await stack.call("interrupt", agent_id=agent)
    await eventually(lambda: len(prompts(tmp_path)) == 2, timeout=30)
    assert [e for e in log_of(tmp_path) if "cancel" in e]
    together = prompts(tmp_path)[1]
    assert together.index("first waiting") < together.index("second waiting")


async def test_an_agent_that_dies_mid_turn_comes_back_with_its_session_and_then_stops(
    stack: Stack, tmp_path: Path
) -> None:
    agent = await started(stack, tmp_path, "acp-dies")
    [first] = [e["new_session"] for e in log_of(tmp_path) if "new_session" in e]
    await send(stack, agent, "acp:die", wait=True, timeout=30)
    # Started again by its host, its session loaded, ready for what comes next.
    await eventually(lambda: [e for e in log_of(tmp_path) if e.get("load_session") == first])
    await eventually(lambda: state_is(stack, agent, "ready"), timeout=30)
    result = await send(stack, agent, "still there?", wait=True, timeout=30)
    assert result["status"] == "submitted", result
    await eventually(lambda: len(prompts(tmp_path)) == 2)
    assert [p.split("] ", 1)[1] for p in prompts(tmp_path)] == ["acp:die", "still there?"]
    assert {e["session"] for e in log_of(tmp_path) if "prompt" in e} == {first}

    assert (await stack.call("stop_agent", agent_id=agent))["stopped"]
    await eventually(lambda: [e for e in log_of(tmp_path) if e.get("stdin_closed")])
    await eventually(lambda: state_is(stack, agent, "offline"))


async def test_a_bad_start_is_refused_with_what_to_fix(stack: Stack, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="not a folder"):
        await stack.call(
            "start_agent", agent_id="nowhere", dir=str(tmp_path / "missing"), command=SCRIPTED
        )
    with pytest.raises(Exception, match="not an absolute path"):
        await stack.call("start_agent", agent_id="nowhere", dir="relative", command=SCRIPTED)
    with pytest.raises(Exception, match="no process agent"):
        await stack.call("stop_agent", agent_id="never-started")
