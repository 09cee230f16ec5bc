"""A process agent's own processes are the agent, never the human, rule by rule with real
processes: the gateway learns the agent's process only from the worker that started it (the
kernel confirms the worker is its parent); what descends from it, or runs in the session it
leads, is that agent's while that very process runs (a pid given to a later process is nobody's
agent), at the socket and at the console alike; and while a process agent runs here unknown,
the human's decisions are refused, not guessed, though a hook's reports go on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentcomms.errors import PanesUnknown
from agentcomms.models import Agent
from agentcomms.store import Store
from gateway.console.peers import refusal
from gateway.socket.caller import Peer
from gateway.socket.panes import AgentPane, AgentPanes, AgentProcesses, holding, started_at

ME = Peer(os.getpid(), os.getuid(), os.getgid())


@contextmanager
def _agent(script: str) -> Iterator[tuple[subprocess.Popen[bytes], list[int]]]:
    """A stand-in for a process agent, started as the worker starts one (a child in a session
    of its own), and the pids its "tool" printed: what the agent ran."""
    proc = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None
        pids = [int(proc.stdout.readline())]
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pids[0]}/comm").read_text().strip() != "sleep":
            assert time.monotonic() < deadline, "the agent's tool never started"
            time.sleep(0.01)
        yield proc, pids
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]


def test_only_the_worker_that_started_the_agent_tells_its_process() -> None:
    with _agent("sleep 30 & echo $!; wait") as (agent, (tool,)):
        processes = AgentProcesses()
        # Its tool's child is not the teller's own: an agent cannot pass itself off as another.
        with pytest.raises(ValueError, match=f"process {tool} is not a child of"):
            processes.started("backend", tool, ME)
        with pytest.raises(ValueError, match="not a child of the process telling it"):
            processes.started("backend", agent.pid, Peer(agent.pid, ME.uid, ME.gid))
        with pytest.raises(ValueError, match="no process 99999999 runs on this host"):
            processes.started("backend", 99_999_999, ME)
        assert processes.running("backend") == []

        processes.started("backend", agent.pid, ME)
        (told,) = processes.running("backend")
        assert (told.agent_id, told.pid, told.started) == (
            "backend",
            agent.pid,
            started_at(agent.pid),
        )
    # Gone: forgotten.
    assert processes.running("backend") == []


@pytest.mark.parametrize(
    "script, how",
    [
        ("sleep 30 & echo $!; wait", "descends from the agent's process"),
        # Left running in the background, its parent gone: still in the agent's session.
        ("sh -c 'sleep 30 & echo $!' ; sleep 30", "runs in the session the agent's process"),
    ],
    ids=["child", "orphan"],
)
def test_what_the_agent_runs_is_the_agents(script: str, how: str) -> None:
    with _agent(script) as (agent, (tool,)):
        processes = AgentProcesses()
        processes.started("backend", agent.pid, ME)
        found = holding(tool, processes.running("backend"))
        assert found is not None and found.pane.agent_id == "backend"
        assert how in found.how and "process agent 'backend'" in str(found)
        # The human (here: the test, the agent's parent) is not the agent.
        assert holding(os.getpid(), processes.running("backend")) is None


def test_a_pid_given_to_a_later_process_is_nobodys_agent() -> None:
    with _agent("sleep 30 & echo $!; wait") as (agent, (tool,)):
        started = started_at(agent.pid)
        assert started is not None
        earlier = AgentPane("backend", "", agent.pid, "", "", started=started - 1)
        assert holding(tool, [earlier]) is None
        assert holding(tool, [AgentPane("backend", "", agent.pid, "", "", started=started)])


async def _agent_row(store: Store, host: str, status: str, state: str) -> None:
    await store.settle_events(
        [],
        agent=Agent(
            id="backend", type="process", target="acp: x", host=host, status=status, state=state
        ),
    )


@contextmanager
def _dialing(port: int) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A process agent stand-in whose tool connects to loopback ``port`` and stays connected;
    the agent and the tool's own port."""
    dial = (
        f"import socket, time; s = socket.create_connection(('127.0.0.1', {port})); "
        "print(s.getsockname()[1], flush=True); time.sleep(30)"
    )
    script = f'{sys.executable} -c "{dial}" & wait'
    proc = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None
        yield proc, int(proc.stdout.readline())
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]


async def test_the_console_refuses_what_a_process_agent_runs(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as console:
        server = ("127.0.0.1", console.getsockname()[1])
        with _dialing(server[1]) as (agent, port):
            async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}") as store:
                panes = AgentPanes(store, "this-host")
                await _agent_row(store, "this-host", "online", "ready")
                unknown = await refusal(panes, ("127.0.0.1", port), server)
                assert unknown is not None and "cannot tell now" in unknown
                panes.processes.started("backend", agent.pid, ME)
                refused = await refusal(panes, ("127.0.0.1", port), server)
                assert refused is not None and "process agent 'backend'" in refused


async def test_a_process_agent_running_here_unknown_refuses_the_humans_decisions(
    tmp_path: Path,
) -> None:
    async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}") as store:
        panes = AgentPanes(store, "this-host")

        async def agent(host: str, status: str, state: str) -> None:
            await _agent_row(store, host, status, state)

        # Stopped, or on another host: nothing of this host's to tell.
        await agent("this-host", "offline", "offline")
        assert await panes.panes() == []
        await agent("far", "online", "ready")
        assert await panes.panes() == []
        # Registered, not started yet: no process of its could ask anything.
        await agent("this-host", "online", "unknown")
        assert await panes.panes() == []

        await agent("this-host", "online", "ready")
        with pytest.raises(PanesUnknown, match="process agent 'backend' runs on this host"):
            await panes.panes()
        assert await panes.panes(deciding=False) == []  # a hook's report is not held up

        with _agent("sleep 30 & echo $!; wait") as (process, (tool,)):
            panes.processes.started("backend", process.pid, ME)
            found = holding(tool, await panes.panes())
            assert found is not None and found.pane.pid == process.pid
        # Its process gone while the projection still says it runs: unknown again.
        with pytest.raises(PanesUnknown):
            await panes.panes()
