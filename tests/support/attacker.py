"""What anyone who reaches Temporal can do with the stock SDK: run a worker and a workflow of their
own and schedule agentcomms' activities, by name, on a queue the deployment's workers poll."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agentcomms.temporal import temporal_binary


@workflow.defn(sandboxed=False)
class Attacker:
    @workflow.run
    async def run(self, queue: str, activity: str, request: dict[str, Any]) -> None:
        await workflow.execute_activity(
            activity,
            request,
            task_queue=queue,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


async def refusals_of_attacks(
    client: Client,
    queue: str,
    asks: list[tuple[str, dict[str, Any]]],
    *,
    workflow_id: str = "attack",
) -> list[ApplicationError]:
    """Schedule each (activity, request) on `queue` from an attacker's workflow (its id starts
    with `workflow_id`); the error each was refused with (each must be)."""
    refused = []
    own_queue = f"attacker-{uuid4().hex[:8]}"
    async with Worker(client, task_queue=own_queue, workflows=[Attacker]):
        for activity, request in asks:
            with pytest.raises(WorkflowFailureError) as failed:
                await client.execute_workflow(
                    Attacker.run,
                    args=[queue, activity, request],
                    id=f"{workflow_id}-{uuid4().hex[:8]}",
                    task_queue=own_queue,
                )
            activity_failure = failed.value.cause
            assert isinstance(activity_failure, ActivityError), activity
            refusal = activity_failure.cause
            assert isinstance(refusal, ApplicationError), activity
            refused.append(refusal)
    return refused


def temporal_cli(env: WorkflowEnvironment, *args: str) -> None:
    """Run ``temporal workflow ARGS`` against the test's dev server, as anyone who reaches it can."""
    address = env.client.service_client.config.target_host
    command = [str(temporal_binary()), "workflow", *args, "--address", address]
    subprocess.run(command, check=True, capture_output=True)
