"""Hosts of one deployment: an `agentcomms worker --host-id` process for the panes of a host
other than the gateway's, as a second machine runs it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.service import RPCError

from agentcomms.temporal import last_polls
from agentcomms.workflow_ids import host_task_queue
from tests.support.cli import AGENTCOMMS, env_for
from tests.support.home import write_config
from tests.support.stack import STACK_KEY, Stack
from tests.support.waiting import eventually


async def worker_process(
    stack: Stack, host: str, home: Path, *options: str, config: dict[str, Any] | None = None
) -> asyncio.subprocess.Process:
    """`agentcomms worker --host-id HOST`, configured for the stack's Temporal and projection
    (and `config`'s further sections); returns once it polls its host's queue."""
    write_config(
        home,
        {
            **(config or {}),
            "temporal": {
                "address": stack.cfg.temporal.address,
                "task_queue": stack.cfg.temporal.task_queue,
            },
            "database": {"url": stack.cfg.database.resolved_url()},
            # One deployment, one key: the worker types what the test's gateway signed.
            "security": {"deployment_key": STACK_KEY},
        },
    )
    with worker_log(home).open("a") as log:  # read by a test that fails
        process = await asyncio.create_subprocess_exec(
            AGENTCOMMS, "worker", "--host-id", host, *options, env=env_for(home),
            stdout=log, stderr=log,
        )  # fmt: skip

    async def polling() -> bool:
        try:
            polls = await last_polls(stack.client, host_task_queue(host))
        except RPCError:  # a busy dev server may cancel one question: ask it again
            return False
        return any(who.startswith(f"{process.pid}@") for who in polls)

    await eventually(polling, timeout=30, interval=0.2)
    return process


def worker_log(home: Path) -> Path:
    """Where :func:`worker_process` writes what the worker says."""
    return home / "worker.log"


@asynccontextmanager
async def forwarded_socket(target: Path, path: Path) -> AsyncIterator[Path]:
    """A Unix socket at `path` whose every connection is relayed to the one at `target`, as
    `ssh -L path:target gateway-host` gives another machine the gateway's socket: the gateway
    sees the forwarding process connect, never the far one."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            far_reader, far_writer = await asyncio.open_unix_connection(str(target))
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, far_writer), pipe(far_reader, writer))

    server = await asyncio.start_unix_server(relay, str(path))
    try:
        yield path
    finally:
        server.close()
        await server.wait_closed()
