"""An approval outlives the worker: the hook waits through a worker's restart and still gets the
decision (the gateway's restart is in tests/test_approvals.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.support.cli import AGENTCOMMS
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


def _hook(tmp_path: Path, socket: Path, agent: str) -> subprocess.Popen[str]:
    """The hook as Claude Code runs it, in the background: the gateway runs in this loop."""
    given = tmp_path / "payload.json"
    given.write_text(json.dumps(PERMISSION))
    with given.open() as stdin:
        return subprocess.Popen(
            [AGENTCOMMS, "hook", "claude-code"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={
                "PATH": "/usr/bin:/bin",
                "AGENTCOMMS_SOCKET": str(socket),
                "AGENTCOMMS_AGENT_ID": agent,
            },
        )


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
        proc = _hook(tmp_path, stack.cfg.server.socket(), agent)
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
            proc.kill()
            await _stopped(workers)
        assert proc.returncode == 0, err
        assert json.loads(out)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
