"""`trace` and `doctor` as a user runs them, while things break one at a time: a missing pane,
a stopped worker; then both mended. Real Temporal, real tmux, real SQLite, the CLI as a process."""

from __future__ import annotations

import json
import os
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from agentcomms.ids import new_event_id
from tests.conftest import Tmux, write_config
from tests.stack import Stack, eventually, running_stack, typed
from tests.test_cli_agents import cli
from tests.test_mailbox import recorder
from workers.main import build_workers


def ops_home(tmp_path: Path, stack: Stack) -> Path:
    """A CLI home whose config names the stack's socket, Temporal queue and projection."""
    home = tmp_path / "cli-home"
    write_config(
        home,
        {
            "server": {"socket_path": str(stack.cfg.server.socket())},
            "temporal": {
                "address": stack.cfg.temporal.address,
                "task_queue": stack.cfg.temporal.task_queue,
            },
            "database": {"url": stack.cfg.database.url},
        },
    )
    return home


async def start_workers(stack: Stack) -> AsyncExitStack:
    workers = AsyncExitStack()
    for worker in build_workers(stack.client, stack.cfg, stack.store, host=stack.host):
        await workers.enter_async_context(worker)
    return workers


@pytest.mark.timeout(300)
async def test_trace_and_doctor_say_what_is_wrong_until_it_is_mended(
    temporal_env, tmux: Tmux, tmp_path: Path
):
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as stack:
        workers = await start_workers(stack)
        home = ops_home(tmp_path, stack)
        agent = stack.agent_id("backend")
        # Registered on a pane that does not exist yet.
        await stack.call(
            "register", agent_id=agent, target="rec:0.0", socket=tmux.socket, submit_delay_ms=0
        )
        event_id = (await stack.call("send", agent_id=agent, message="hello"))["event_id"]

        async def unreachable() -> bool:
            row = await stack.store.get_agent(agent)
            return row is not None and row.status == "unreachable"

        await eventually(unreachable)

        traced = await cli(home, "trace", event_id)
        assert traced.returncode == 0, traced.stderr
        out = traced.stdout
        assert "accepted" in out and "`agentcomms send`" in out
        assert f"by the gateway on {stack.host} (pid {os.getpid()})" in out, out
        assert f"in agent-{agent}, position 1 of 1" in out
        assert f"pane rec:0.0 on host {stack.host} is missing since" in out, out
        assert "try 1 failed: " in out and "rec" in out.partition("try 1 failed: ")[2], out
        assert f"workflow     agent-{agent}" in out
        assert f"/namespaces/default/workflows/agent-{agent}" in out

        doctor = await cli(home, "doctor")
        assert doctor.returncode == 1, doctor.stdout
        assert f"✗ agent {agent}: pane rec:0.0 on host {stack.host} is missing" in doctor.stdout
        assert f"✓ host {stack.host}: a worker polls" in doctor.stdout

        # The worker stops: doctor names the host whose agents have nobody to type for them.
        await workers.aclose()
        doctor = await cli(home, "doctor", "--json")
        assert doctor.returncode == 1
        report = json.loads(doctor.stdout)
        failed = {c["name"]: c for c in report["checks"] if not c["ok"]}
        assert f"worker {stack.host}" in failed, report
        assert (
            f"host {stack.host} has no worker for its agents {agent}"
            in (failed[f"worker {stack.host}"]["detail"])
        )
        assert "agentcomms worker" in failed[f"worker {stack.host}"]["fix"]
        traced = json.loads((await cli(home, "trace", event_id, "--json")).stdout)
        assert traced["status"] == "new"
        assert any("worker" in why for why in traced["why"]), traced

        # The pane is created and the worker comes back: typed, and all is well.
        _, recorded = recorder(tmux, tmp_path, "rec")
        workers = await start_workers(stack)
        try:

            async def delivered() -> dict | None:
                t = json.loads((await cli(home, "trace", event_id, "--json")).stdout)
                return t if t["status"] == "delivered" else None

            traced = await eventually(delivered, timeout=90, interval=1)
            await typed(recorded, b"hello\r")
            steps = {s["step"]: s for s in traced["steps"]}
            assert steps["typed"]["at"] == traced["delivered_at"] is not None
            # Each failed attempt is a step of its own, with its time and error, before the last.
            tries = [s for s in traced["steps"] if s["step"] == "try"]
            failed = traced["attempts"] - 1
            assert failed >= 1 and len(tries) == min(failed, 10), traced
            assert tries[-1]["detail"].startswith(f"try {failed} failed: "), tries
            assert all(t["at"] is not None for t in tries)
            assert steps["typed"]["detail"].endswith(f"on try {traced['attempts']}")
            assert f"into pane rec:0.0 on host {stack.host}" in steps["typed"]["detail"]
            assert traced["workflow_id"] == f"agent-{agent}"

            doctor = await cli(home, "doctor")
            assert doctor.returncode == 0, doctor.stdout
            assert "✗" not in doctor.stdout
        finally:
            await workers.aclose()


async def test_trace_of_an_unknown_id_is_one_line(temporal_env, tmp_path: Path):
    async with running_stack(temporal_env.client, tmp_path) as stack:
        home = ops_home(tmp_path, stack)
        missing = new_event_id()
        traced = await cli(home, "trace", missing)
        assert traced.returncode == 1
        assert traced.stderr.strip() == (
            f"error: no event '{missing}'; `agentcomms events AGENT` lists an agent's event ids"
        )


async def test_trace_of_a_delivered_message_and_a_reply(temporal_env, tmux: Tmux, tmp_path: Path):
    async with running_stack(temporal_env.client, tmp_path) as stack:
        home = ops_home(tmp_path, stack)
        agent = stack.agent_id("front")
        target, out = recorder(tmux, tmp_path, "rec")
        await stack.call(
            "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
        )
        sent = await stack.call("send", agent_id=agent, message="hi", wait=True)
        assert sent["delivered"]
        await typed(out, b"hi\r")
        traced = json.loads((await cli(home, "trace", sent["event_id"], "--json")).stdout)
        assert [s["step"] for s in traced["steps"]] == ["accepted", "queued", "typed"]
        assert traced["why"] == []
        reply = await stack.call("reply", channel_id="cli:local", message="done", agent_id=agent)
        traced = json.loads((await cli(home, "trace", reply["event_id"], "--json")).stdout)
        assert traced["direction"] == "out" and traced["status"] == "delivered"
        assert [s["step"] for s in traced["steps"]] == ["accepted", "delivered"]
