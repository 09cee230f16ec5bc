"""`wait_update` asks the next run again when the run its update reached ended without answering,
rather than reporting "not done" while time remains (a `send --wait` would say queued)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from workflows.updates import wait_update


@workflow.defn(sandboxed=False)
class Hops:
    """Answers `done` only on its second run; `hop` ends the first run while an update waits."""

    def __init__(self) -> None:
        self._hop = False

    @workflow.run
    async def run(self, run: int) -> None:
        if run == 1:
            await workflow.wait_condition(lambda: self._hop)
            # Ended without letting the waiting update answer: Temporal fails it.
            workflow.continue_as_new(2)
        await workflow.wait_condition(lambda: False)

    @workflow.signal
    def hop(self) -> None:
        self._hop = True

    @workflow.update(unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def done(self, timeout_s: float) -> str:
        run = 2 if workflow.info().continued_run_id else 1
        await workflow.wait_condition(lambda: run == 2, timeout=timedelta(seconds=timeout_s))
        return "answered by the next run"


async def test_an_update_its_run_never_answered_is_asked_of_the_next_run(
    temporal_env: WorkflowEnvironment,
) -> None:
    client = temporal_env.client
    queue = f"hops-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[Hops]):
        handle = await client.start_workflow(
            Hops.run, 1, id=f"hops-{uuid.uuid4()}", task_queue=queue
        )
        waiting = asyncio.create_task(
            wait_update(handle, Hops.done, lambda s: s, 30, moved=lambda _: False)
        )
        await asyncio.sleep(1)  # the update is accepted by the first run and waits there
        await handle.signal(Hops.hop)
        assert await waiting == "answered by the next run"

        # What it hides: asked once, the same update fails when its run ends.
        again = await client.start_workflow(
            Hops.run, 1, id=f"hops-{uuid.uuid4()}", task_queue=queue
        )
        once = asyncio.create_task(again.execute_update("done", 30.0, result_type=str))
        await asyncio.sleep(1)
        await again.signal(Hops.hop)
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            answer = await once
            raise AssertionError(f"answered {answer!r} by a run that ended")
        assert "completed before the Update completed" in str(failed.value.cause)
        for h in (handle, again):
            await h.terminate()
