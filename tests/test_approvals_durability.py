"""An approval outlives the worker: the hook waits through a worker's restart and still gets the
decision (the gateway's restart is in tests/test_approvals.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.support.hooks import start_hook, stop_hook
from tests.support.stack import running_stack
from tests.support.waiting import eventually
from workers.main import build_workers

PERMISSION = {
    "session_id": "s",
    "hook_event_name": "PermissionRequest",
    "tool_name": "Bash",
    "tool_input": {"command": "touch durable.txt"},
    "permission_suggestions": [],
}


async def _started(workers: list[Worker]) -> list[Worker]:
    for worker in workers:
        await worker.__aenter__()
    return workers


async def _stopped(workers: list[Worker]) -> None:
    for worker in workers:
        await worker.__aexit__(None, None, None)


async def test_the_hook_gets_the_decision_across_a_worker_restart(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as stack:
        workers = await _started(build_workers(stack.client, stack.cfg, stack.store))
        agent = stack.agent_id()
        proc = start_hook(stack, PERMISSION, agent, tmp_path)
        try:

            async def opened() -> str | None:
                rows = (await stack.call("approvals"))["approvals"]
                return next((r["id"] for r in rows if r["agent_id"] == agent), None)

            approval = await eventually(opened, timeout=30)
            await asyncio.sleep(0.5)  # the hook's long wait is in the workflow now
            await _stopped(workers)
            await asyncio.sleep(1.0)
            assert proc.poll() is None  # still waiting
            workers = await _started(build_workers(stack.client, stack.cfg, stack.store))
            answer = await stack.call("approval_decide", id=approval, behavior="allow")
            assert answer["accepted"] is True
            out, err = await asyncio.to_thread(proc.communicate, timeout=60)
        finally:
            stop_hook(proc)
            await _stopped(workers)
        assert proc.returncode == 0, err
        assert json.loads(out)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
