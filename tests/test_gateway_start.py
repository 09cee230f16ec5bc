"""A gateway starting while no worker polls yet (`up` starts its worker after the gateway; a
restart finds the last worker's queue silent) waits on nothing a worker must answer: it is up at
once, and what it watches (the approvals still open) catches up once a worker polls."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from tests.support.hooks import open_approval
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually
from workers.main import build_workers


@asynccontextmanager
async def _workers(stack: Stack) -> AsyncIterator[None]:
    """The stack's workers polling its queues, stopped at the end."""
    async with AsyncExitStack() as running:
        for worker in build_workers(stack.client, stack.cfg, stack.store, host=stack.host):
            await worker.__aenter__()
            running.push_async_callback(functools.partial(worker.__aexit__, None, None, None))
        yield


async def test_a_gateway_restarted_before_its_worker_polls_is_up_at_once(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as stack:
        agent = stack.agent_id()
        async with _workers(stack):
            approval = await open_approval(stack, agent)
            await eventually(lambda: _listed(stack, approval))
        # The worker is gone and its queue was polled a moment ago: a query to an approval
        # waits for the next poll until its own timeout, tens of seconds.
        async with asyncio.timeout(10):
            await stack.restart_gateway()
            assert (await stack.call("ping"))["pong"] is True
        watched: Callable[[], bool] = lambda: approval in stack.gateway.approvals._waiting  # noqa: E731
        assert not watched()  # not yet: nothing could answer
        async with _workers(stack):
            await eventually(lambda: watched() or None, timeout=30)


async def _listed(stack: Stack, approval: str) -> bool:
    rows = (await stack.call("approvals"))["approvals"]
    return any(r["id"] == approval for r in rows)
