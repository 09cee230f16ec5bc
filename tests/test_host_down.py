"""A host whose worker stops: its agents show as unreachable, since when, with how many messages
wait; nothing is lost, and all of it is typed in order when the worker comes back.

Real Temporal, real tmux, real SQLite: the gateway's machine runs the shared worker, the pane's
host ("build-…") a worker of its own: an `agentcomms worker --host-id` process that the test kills,
as a machine that goes away would, and starts again.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, TemporalConfig
from agentcomms.models import utcnow
from agentcomms.store import Store
from agentcomms.temporal import connect, dev_server_args, poll_silence_s
from tests.fakes.serve import free_port
from tests.support.cli import cli, cli_home
from tests.support.events import message, record_all
from tests.support.hosts import worker_process
from tests.support.stack import Stack, running_stack
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import eventually, typed
from workers.main import build_workers

# A server that ends an idle worker's poll this soon shows a silent host within seconds.
SHORT_POLL_S = 4


@pytest.fixture(scope="module")
async def short_polls(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TemporalConfig]:
    """A dev server started as `up` starts its own, configured with ``long_poll_s``."""
    root = tmp_path_factory.mktemp("short-polls")
    temporal = TemporalConfig(
        address=f"127.0.0.1:{free_port()}",
        long_poll_s=SHORT_POLL_S,
        db_filename=root / "temporal.db",
    )
    server = await asyncio.create_subprocess_exec(
        *dev_server_args(temporal, headless=True),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await connect(temporal, patience_s=30)
        yield temporal
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), 20)


async def host_worker(stack: Stack, host: str) -> AsyncExitStack:
    """The worker of the panes' host: it polls that host's queue only."""
    workers = AsyncExitStack()
    for worker in build_workers(stack.client, stack.cfg, stack.store, host=host, shared=False):
        await workers.enter_async_context(worker)
    return workers


async def listed(stack: Stack, agent: str) -> dict[str, Any]:
    rows = (await stack.call("agents"))["agents"]
    return next((a for a in rows if a["id"] == agent), {"status": None})


@pytest.mark.timeout(180)
async def test_a_stopped_host_shows_its_agents_unreachable_then_types_everything_in_order(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path) as stack:
        host = f"build-{stack.agent_id('h')}"
        agent = stack.agent_id("backend")
        target, out = recorder(tmux, tmp_path, "rec")
        home = tmp_path / "build-home"
        worker = await worker_process(stack, host, home)
        try:
            await stack.call(
                "register", agent_id=agent, target=target, socket=tmux.socket,
                submit_delay_ms=0, host=host,
            )  # fmt: skip
            first = await stack.call("send", agent_id=agent, message="one", wait=True)
            assert first["delivered"] is True
            assert (await listed(stack, agent))["status"] == "online"
        finally:
            worker.kill()  # the machine goes away: no goodbye to Temporal
            await worker.wait()
        stopped_at = utcnow()

        for text in ("two", "three"):
            assert (await stack.call("send", agent_id=agent, message=text))["status"] == "queued"

        async def unreachable() -> dict[str, Any] | None:
            row = await listed(stack, agent)
            return row if row["status"] == "unreachable" else None

        # A message for the host makes a workflow task that no worker takes: seen within
        # seconds, long before the host's silence would show.
        row = await eventually(unreachable, timeout=60, interval=1)
        assert row["pending"] == 2
        since = datetime.fromisoformat(row["unreachable_since"])
        # Since the worker's last poll, as Temporal reports it: before it stopped.
        assert stopped_at - timedelta(seconds=90) <= since <= stopped_at
        assert f"host {host} has no worker (last poll " in row["last_error"]
        assert f"`agentcomms worker --host-id {host}`" in row["last_error"]

        status = await stack.call("status")
        assert status["hosts_down"] == [
            {"host": host, "since": row["unreachable_since"], "agents": [agent], "pending": 2}
        ]
        home = cli_home(tmp_path, stack)
        shown = await cli(home, "status")
        assert f"Host down: {host}" in shown.stdout, shown.stdout
        assert f"unreachable: {agent}; 2 messages wait" in shown.stdout
        table = await cli(home, "agents")
        assert f"unreachable since {row['unreachable_since']}" in table.stdout
        rows = json.loads((await cli(home, "agents", "--json")).stdout)["agents"]
        assert [(a["id"], a["status"], a["pending"]) for a in rows] == [(agent, "unreachable", 2)]

        # The worker comes back: everything waiting is typed, in order, once.
        worker = await worker_process(stack, host, home)
        try:
            await typed(out, as_sent("one", "two", "three"), timeout=60)

            async def online_again() -> dict[str, Any] | None:
                row = await listed(stack, agent)
                return row if row["status"] == "online" and row["pending"] == 0 else None

            row = await eventually(online_again, timeout=60, interval=0.5)
            assert "unreachable_since" not in row
            assert (await stack.call("status"))["hosts_down"] == []
        finally:
            worker.terminate()
            await worker.wait()


@pytest.mark.timeout(120)
async def test_an_idle_host_that_stops_polling_shows_unreachable_since_its_last_poll(
    short_polls: TemporalConfig, tmux: Tmux, tmp_path: Path
) -> None:
    """No message waits, so no task betrays the host: its silence does, once the server has
    ended a long poll and a quarter of another without one (``long_poll_s``, which the server
    was started with)."""
    client = await connect(short_polls)

    def short(cfg: Config) -> Config:
        temporal = cfg.temporal.model_copy(update={"long_poll_s": short_polls.long_poll_s})
        return cfg.model_copy(update={"temporal": temporal})

    async with running_stack(client, tmp_path, configure=short) as stack:
        host = f"idle-{stack.agent_id('h')}"
        agent = stack.agent_id("idle")
        target, _ = recorder(tmux, tmp_path, "rec")
        workers = await host_worker(stack, host)
        try:
            await stack.call(
                "register", agent_id=agent, target=target, socket=tmux.socket,
                submit_delay_ms=0, host=host,
            )  # fmt: skip
            await eventually(lambda: _status_is(stack, agent, "online"), timeout=30)
            # Idle and alive: polls again as each long poll ends, so it stays online.
            await asyncio.sleep(poll_silence_s(short_polls) * 2)
            assert (await listed(stack, agent))["status"] == "online"
        finally:
            await workers.aclose()
        stopped_at = utcnow()
        assert (await listed(stack, agent))["status"] == "online"  # not yet known

        row = await eventually(
            lambda: _status_is(stack, agent, "unreachable"), timeout=60, interval=0.5
        )
        assert row["pending"] == 0
        since = datetime.fromisoformat(row["unreachable_since"])
        assert stopped_at - timedelta(seconds=SHORT_POLL_S * 2) <= since <= stopped_at


async def _status_is(stack: Stack, agent: str, status: str) -> dict[str, Any] | None:
    row = await listed(stack, agent)
    return row if row["status"] == status else None  # the projection may not have it yet


async def test_waiting_counts_are_per_agent_and_only_messages_not_yet_typed(
    database_url: str,
) -> None:
    """What `agents` shows for a down host's agents, counted from the projection's events (on
    PostgreSQL too when the suite has one)."""
    store = await Store.open(database_url)
    try:
        await record_all(
            store,
            message("a"),
            message("a"),
            message("b"),
            message("b", type="interrupt", role="human"),  # not a message that waits to be typed
            message("b", status="delivered"),
            message("c", direction="out", type="agent_message", role="agent"),
        )
        assert await store.waiting_counts(["a", "b", "c", "d"]) == {"a": 2, "b": 1}
        assert await store.waiting_counts([]) == {}
    finally:
        await store.close()
