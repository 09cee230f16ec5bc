"""Determinism of CallWorkflow: a whole call's history replays, live and as recorded
(tests/histories/calls/), so a change that breaks the calls in flight fails here."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from agentcomms.workflow_ids import call_workflow_id
from tests.support.phone import Phone
from tests.support.stack import running_stack
from tests.support.waiting import eventually
from workflows.call import CallWorkflow

# Apart from the mailbox's histories, which another test replays as AgentWorkflow's.
HISTORIES = Path(__file__).parent / "histories" / "calls"
RECORDED = {path.name: path.read_text() for path in sorted(HISTORIES.glob("*.json"))}


def replayer() -> Replayer:
    return Replayer(workflows=[CallWorkflow], data_converter=pydantic_data_converter)


async def test_a_whole_call_replays(temporal_env: WorkflowEnvironment, tmp_path: Path) -> None:
    async with running_stack(temporal_env.client, tmp_path) as stack:
        phone = Phone(stack)
        first = asyncio.create_task(stack.call("call", agent_id="a", message="Replay me?"))
        call_id = await phone.answer()
        await phone.reply(call_id, "sure")
        await first
        await phone.plays(
            call_id, stack.call("call_say", call_id=call_id, message="Heard.", listen=False)
        )
        asked = asyncio.create_task(stack.call("call_say", call_id=call_id, message="More?"))
        await phone.reply(call_id, "no")
        await asked
        await stack.call("call_end", call_id=call_id)
        handle = stack.client.get_workflow_handle(call_workflow_id(call_id))
        await eventually(handle.result)
        history = await handle.fetch_history()
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
    # To keep this call's history (after a change that must go on replaying it):
    # AGENTCOMMS_RECORD_HISTORIES=tests/histories pytest tests/test_call_replay.py
    if record_to := os.environ.get("AGENTCOMMS_RECORD_HISTORIES"):
        (Path(record_to) / "calls" / "local-phone.json").write_text(history.to_json())


@pytest.mark.parametrize("name", RECORDED)
async def test_recorded_calls_replay(name: str) -> None:
    history = WorkflowHistory.from_json("call-recorded", RECORDED[name])
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
