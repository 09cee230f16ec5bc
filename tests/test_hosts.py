"""Several hosts on one machine: two `agentcomms worker --host-id` processes, two tmux servers,
and a gateway whose own machine runs no worker. Each host's worker types only for the agents registered on it; a host
whose worker stops keeps its agents' messages until it is back; an agent moved to the other host
in the middle of a stream loses and repeats nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.temporal import last_polls
from agentcomms.workflow_ids import mailbox_id
from tests.support.hosts import worker_process
from tests.support.stack import running_stack
from tests.support.tmux import SENT_HEADER, Tmux, as_sent, recorder
from tests.support.waiting import eventually, typed


async def stop(worker: asyncio.subprocess.Process) -> None:
    if worker.returncode is None:
        worker.kill()  # as a machine that goes away
        await worker.wait()


def lines(out: Path) -> list[str]:
    return [
        line.removeprefix(SENT_HEADER) for line in out.read_bytes().decode().split("\r") if line
    ]


@pytest.mark.timeout(240)
async def test_each_host_types_for_its_own_agents_and_a_moved_agent_loses_nothing(
    temporal_env: WorkflowEnvironment, tmux_socket_dir: Path, tmp_path: Path
) -> None:
    one, two = Tmux(tmux_socket_dir / "host-one"), Tmux(tmux_socket_dir / "host-two")
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as stack:
        h1, h2 = f"one-{stack.agent_id('h')}", f"two-{stack.agent_id('h')}"
        # Each also polls the shared queue, where every mailbox starts.
        host_one = await worker_process(stack, h1, tmp_path / "home-one")
        host_two = await worker_process(stack, h2, tmp_path / "home-two")
        try:
            a, b = stack.agent_id("a"), stack.agent_id("b")
            pane_a, out_a = recorder(one, tmp_path, "a-on-one")
            pane_b, out_b = recorder(two, tmp_path, "b-on-two")
            await stack.call(
                "register", agent_id=a, target=pane_a, socket=one.socket, host=h1,
                submit_delay_ms=0,
            )  # fmt: skip
            await stack.call(
                "register", agent_id=b, target=pane_b, socket=two.socket, host=h2,
                submit_delay_ms=0,
            )  # fmt: skip
            for i in range(10):
                await stack.call("send", agent_id=a, message=f"a{i}")
                await stack.call("send", agent_id=b, message=f"b{i}")
            await typed(out_a, as_sent(*(f"a{i}" for i in range(10))))
            await typed(out_b, as_sent(*(f"b{i}" for i in range(10))))
            for agent, host in ((a, h1), (b, h2)):
                described = await stack.client.get_workflow_handle(mailbox_id(agent)).describe()
                assert described.task_queue == f"agentcomms-host-{host}"

            # Host two's worker stops: host one's, though it could reach the pane from this
            # machine, types nothing for b; everything waits, and comes in order once it is back.
            await stop(host_two)
            for i in range(10, 15):
                await stack.call("send", agent_id=b, message=f"b{i}")
            await asyncio.sleep(3)
            assert lines(out_b) == [f"b{i}" for i in range(10)]
            host_two = await worker_process(stack, h2, tmp_path / "home-two")
            await typed(out_b, as_sent(*(f"b{i}" for i in range(15))), timeout=60)

            # a moves to a pane on host two while its messages are being typed on host one.
            await stack.call(
                "register", agent_id=a, target=pane_a, socket=one.socket, host=h1,
                submit_delay_ms=100,
            )  # fmt: skip
            for i in range(10, 40):
                await stack.call("send", agent_id=a, message=f"a{i}")
            await eventually(lambda: len(lines(out_a)) >= 15)
            pane_moved, out_moved = recorder(two, tmp_path, "a-on-two")
            await stack.call(
                "register", agent_id=a, target=pane_moved, socket=two.socket, host=h2,
                submit_delay_ms=0,
            )  # fmt: skip
            for i in range(40, 50):
                await stack.call("send", agent_id=a, message=f"a{i}")
            await eventually(lambda: len(lines(out_a)) + len(lines(out_moved)) >= 50, timeout=90)
            await asyncio.sleep(0.5)  # a late duplicate would show up here
            before, after = lines(out_a), lines(out_moved)
            assert before + after == [f"a{i}" for i in range(50)], (before, after)
            assert len(before) < 40 and after, "the move came after the backlog was typed"
            described = await stack.client.get_workflow_handle(mailbox_id(a)).describe()
            assert described.task_queue == f"agentcomms-host-{h2}"
        finally:
            await stop(host_two)
            await stop(host_one)
            for server in (one, two):
                server.run("kill-server", check=False)


@pytest.mark.timeout(120)
async def test_a_worker_with_no_shared_types_for_its_host_and_leaves_the_shared_queue(
    temporal_env: WorkflowEnvironment, tmux_socket_dir: Path, tmp_path: Path
) -> None:
    # The stack's own worker (the gateway's machine) polls the shared queue, where calls and
    # chat sends run and every mailbox starts; the remote machine's worker only its own queue.
    remote = Tmux(tmux_socket_dir / "remote")
    async with running_stack(temporal_env.client, tmp_path) as stack:
        host = f"remote-{stack.agent_id('h')}"
        worker = await worker_process(stack, host, tmp_path / "home-remote", "--no-shared")
        try:
            agent = stack.agent_id("a")
            pane, out = recorder(remote, tmp_path, "remote")
            await stack.call(
                "register", agent_id=agent, target=pane, socket=remote.socket, host=host,
                submit_delay_ms=0,
            )  # fmt: skip
            await stack.call("send", agent_id=agent, message="typed on the remote host")
            await typed(out, as_sent("typed on the remote host"))
            shared = await last_polls(stack.client, stack.cfg.temporal.task_queue)
            assert shared, "the stack's worker polls the shared queue"
            assert not [who for who in shared if who.startswith(f"{worker.pid}@")]
        finally:
            await stop(worker)
            remote.run("kill-server", check=False)
