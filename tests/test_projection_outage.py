"""The projection never stops the typing: with the database down (PostgreSQL refusing
connections) or locked (another process holds a SQLite file's write lock) mid-stream, messages
are still accepted and typed, in order, once each; their rows catch up once it is back.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, DatabaseConfig
from tests.support.stack import Stack, running_stack
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import eventually


@asynccontextmanager
async def projection_down(url: str) -> AsyncIterator[None]:
    """The database refuses the deployment until the block ends."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        # Another process's write transaction: every write waits out its busy timeout, then
        # fails with "database is locked".
        holder = sqlite3.connect(str(parsed.database), isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    name = parsed.database
    admin = parsed.set(drivername="postgresql", database="postgres")
    conn = await asyncpg.connect(admin.render_as_string(hide_password=False))
    try:
        await conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name
        )
        try:
            yield
        finally:
            await conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    finally:
        await conn.close()


async def _statuses(stack: Stack, agent: str) -> dict[str, str]:
    listed = (await stack.call("events", agent_id=agent, limit=100))["events"]
    return {e["payload"]["text"]: e["status"] for e in listed}


@pytest.mark.timeout(180)
async def test_typing_goes_on_while_the_projection_is_down_and_its_rows_catch_up(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path, database_url: str
) -> None:
    def on_the_database(cfg: Config) -> Config:
        return cfg.model_copy(update={"database": DatabaseConfig(url=database_url)})

    async with running_stack(temporal_env.client, tmp_path, configure=on_the_database) as stack:
        agent = stack.agent_id()
        target, out = recorder(tmux, tmp_path, "rec")
        await stack.call(
            "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
        )
        before = [f"before{i}" for i in range(5)]
        for text in before:
            await stack.call("send", agent_id=agent, message=text)
        await eventually(lambda: out.read_bytes() == as_sent(*before))
        during = [f"during{i}" for i in range(10 if "sqlite" in database_url else 20)]
        async with projection_down(database_url):
            # Sent together, as chat messages come: each is accepted (durable in Temporal).
            sent = await asyncio.gather(
                *(stack.call("send", agent_id=agent, message=text) for text in during)
            )
            assert all(s["event_id"] for s in sent)
            typed = as_sent(*before)

            async def all_typed() -> bool:
                got = out.read_bytes()
                return got.startswith(typed) and got.count(b"\r") == len(before) + len(during)

            # A locked SQLite file holds each of the projection's writes for its busy timeout
            # (10 s); the typing waits for none of them.
            await eventually(all_typed, timeout=8)
            snapshot = await stack.gateway.mailbox.snapshot(agent)
            assert snapshot is not None and snapshot.pending == 0
            assert snapshot.status == "online"
            # What the projection could not take yet is owed, and shown as owed.
            assert snapshot.unrecorded > 0
        # Every message typed once; sent together, they arrive in the order Temporal took them.
        lines = out.read_bytes().split(b"\r")[:-1]
        assert sorted(lines[len(before) :]) == sorted(as_sent(t)[:-1] for t in during)
        assert len(set(lines)) == len(lines)

        async def caught_up() -> bool:
            statuses = await _statuses(stack, agent)
            return all(statuses.get(t) == "delivered" for t in before + during)

        await eventually(caught_up, timeout=90)

        async def nothing_owed() -> bool:
            # The rows are written by the mailbox's projection writes; its count of what it
            # owes is settled by the workflow task after them, a moment later under load.
            snapshot = await stack.gateway.mailbox.snapshot(agent)
            return snapshot is not None and snapshot.unrecorded == 0

        await eventually(nothing_owed, timeout=30)
        listed = (await stack.call("agents"))["agents"]
        row = next(a for a in listed if a["id"] == agent)
        assert row["pending"] == 0 and row["status"] == "online"
