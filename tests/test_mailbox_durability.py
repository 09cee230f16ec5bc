"""Durability under stress: continue-as-new under load, and a worker process killed mid-stream."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import host_name
from agentcomms.workflow_ids import mailbox_id
from tests.support.cli import AGENTCOMMS
from tests.support.home import write_config
from tests.support.stack import STACK_KEY, Stack, running_stack
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import eventually, typed


def expected_bytes(prefix: str, count: int) -> bytes:
    return as_sent(*(f"{prefix}{i}" for i in range(count)))


@pytest.mark.timeout(180)
async def test_continue_as_new_under_load_loses_and_repeats_nothing(
    temporal_env_low_can: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    async with running_stack(temporal_env_low_can.client, tmp_path) as stack:
        agent = stack.agent_id()
        target, out = recorder(tmux, tmp_path, "rec")
        await stack.call(
            "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
        )
        ids = [
            (await stack.call("send", agent_id=agent, message=f"c{i}"))["event_id"]
            for i in range(200)
        ]
        expected = expected_bytes("c", 200)
        await eventually(lambda: len(out.read_bytes()) >= len(expected), timeout=150)
        assert out.read_bytes() == expected

        handle = stack.client.get_workflow_handle(mailbox_id(agent))
        runs = [
            wf.run_id
            async for wf in stack.client.list_workflows(f"WorkflowId = '{mailbox_id(agent)}'")
        ]
        assert len(runs) > 2, "the mailbox should have continued-as-new several times"
        # The set of seen ids crossed those boundaries: an early id sent again is not typed again.
        await stack.call("send", agent_id=agent, message="c0", event_id=ids[0])
        result = await stack.call("send", agent_id=agent, message="after", wait=True)
        assert result["delivered"]
        await typed(out, expected + as_sent("after"))
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        await handle.terminate("test over")


def write_worker_config(home: Path, stack: Stack) -> None:
    cfg = {
        "temporal": {
            "address": stack.cfg.temporal.address,
            "task_queue": stack.cfg.temporal.task_queue,
        },
        "database": {"url": stack.cfg.database.url},
        "server": {"socket_path": str(home / "unused.sock")},
        # One deployment, one key: the worker types what the test's gateway signed.
        "security": {"deployment_key": STACK_KEY},
    }
    write_config(home, cfg)


def start_worker(home: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCOMMS_")}
    env["AGENTCOMMS_HOME"] = str(home)
    return subprocess.Popen(
        [AGENTCOMMS, "worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


@pytest.mark.timeout(180)
async def test_a_worker_killed_mid_stream_loses_nothing_and_types_nothing_twice(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    # The worker runs as a real process on this host's queue; the gateway stays in the test.
    async with running_stack(
        temporal_env.client, tmp_path, with_worker=False, host=host_name()
    ) as stack:
        home = tmp_path / "worker-home"
        write_worker_config(home, stack)
        worker = start_worker(home)
        replacement: subprocess.Popen[bytes] | None = None
        agent = stack.agent_id()
        try:
            target, out = recorder(tmux, tmp_path, "rec")
            await stack.call(
                "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
            )
            for i in range(150):
                await stack.call("send", agent_id=agent, message=f"k{i}")
            await eventually(lambda: out.read_bytes().count(b"\r") >= 20, timeout=60)
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            assert out.read_bytes().count(b"\r") < 150, "the kill should land mid-stream"
            for i in range(150, 200):  # more arrive while no worker runs: they must wait
                await stack.call("send", agent_id=agent, message=f"k{i}")
            replacement = start_worker(home)
            expected = expected_bytes("k", 200)
            await eventually(lambda: len(out.read_bytes()) >= len(expected), timeout=120)
            assert out.read_bytes() == expected
        finally:
            for proc in (worker, replacement):
                if proc and proc.poll() is None:
                    proc.kill()
                    proc.wait()
            await stack.client.get_workflow_handle(mailbox_id(agent)).terminate("test over")
