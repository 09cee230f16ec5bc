"""The delivery activities: bridge errors become the ApplicationError types workflows branch on.

Called through ``ActivityEnvironment``, and once as a local activity of a real workflow on the dev
server (how the agent workflow runs them), so the pydantic payloads and error types survive Temporal.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Worker

from activities.delivery import deliver_to_pane, interrupt_pane
from agentcomms import errors
from agentcomms.models import DeliverRequest, DeliveryOutcome, InterruptRequest, PaneTarget
from tests.support.tmux import Recorder, Tmux


def deliver(pane: PaneTarget, text: str = "hello", event_id: str = "evt_a1") -> DeliverRequest:
    return DeliverRequest(pane=pane, event_id=event_id, text=text, submit_delay_ms=20)


async def test_deliver_types_once(recorder: Recorder) -> None:
    env = ActivityEnvironment()
    first = await env.run(deliver_to_pane, deliver(recorder.pane, "hi $HOME;"))
    again = await env.run(deliver_to_pane, deliver(recorder.pane, "hi $HOME;"))
    assert first == DeliveryOutcome(event_id="evt_a1", typed=True, chars=9)
    assert not again.typed
    assert await recorder.settled() == b"hi $HOME;\r"


async def test_interrupt_presses_once(recorder: Recorder) -> None:
    env = ActivityEnvironment()
    req = InterruptRequest(pane=recorder.pane, event_id="evt_i1", key="Escape")
    assert await env.run(interrupt_pane, req)
    assert not await env.run(interrupt_pane, req)
    assert await recorder.settled() == b"\x1b"


async def test_missing_pane_is_retryable_pane_not_found(tmux: Tmux, tmp_path: Path) -> None:
    env = ActivityEnvironment()
    tmux.new_session("other")
    for pane in (
        PaneTarget(target="gone:0.0", socket=tmux.socket),
        PaneTarget(target="main", socket=str(tmp_path / "no-server")),
    ):
        with pytest.raises(ApplicationError) as caught:
            await env.run(deliver_to_pane, deliver(pane))
        assert caught.value.type == errors.PANE_NOT_FOUND
        assert not caught.value.non_retryable
        with pytest.raises(ApplicationError) as caught:
            await env.run(interrupt_pane, InterruptRequest(pane=pane, event_id="evt_i2"))
        assert caught.value.type == errors.PANE_NOT_FOUND


async def test_bad_key_or_target_is_non_retryable_invalid_target(recorder: Recorder) -> None:
    env = ActivityEnvironment()
    bad_key = InterruptRequest(pane=recorder.pane, event_id="evt_i3", key="C-c Enter")
    bad_target = deliver(PaneTarget(target="main;", socket=recorder.pane.socket))
    with pytest.raises(ApplicationError) as key_error:
        await env.run(interrupt_pane, bad_key)
    with pytest.raises(ApplicationError) as target_error:
        await env.run(deliver_to_pane, bad_target)
    for caught in (key_error, target_error):
        assert caught.value.type == errors.INVALID_TARGET
        assert caught.value.non_retryable
    assert await recorder.settled(0.1) == b""


async def test_other_tmux_failure_is_tmux_failed(tmp_path: Path) -> None:
    pane = PaneTarget(target="main", socket=str(tmp_path / ("s" * 200)))  # path too long for tmux
    with pytest.raises(ApplicationError, match="File name too long") as caught:
        await ActivityEnvironment().run(deliver_to_pane, deliver(pane))
    assert caught.value.type == errors.TMUX_FAILED
    assert not caught.value.non_retryable


@workflow.defn(sandboxed=False)
class DeliverOnce:
    """Types one request through a local activity, as the agent workflow does."""

    @workflow.run
    async def run(self, req: DeliverRequest) -> DeliveryOutcome:
        return await workflow.execute_local_activity(
            deliver_to_pane,
            req,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


async def test_as_a_local_activity_on_a_real_server(
    temporal_env: WorkflowEnvironment, recorder: Recorder
) -> None:
    queue = f"tq-{uuid.uuid4()}"
    client = temporal_env.client
    async with Worker(
        client, task_queue=queue, workflows=[DeliverOnce], activities=[deliver_to_pane]
    ):
        outcome = await client.execute_workflow(
            DeliverOnce.run,
            deliver(recorder.pane, "via temporal 日本", event_id="evt_wf1"),
            id=f"deliver-{uuid.uuid4()}",
            task_queue=queue,
        )
        assert outcome == DeliveryOutcome(event_id="evt_wf1", typed=True, chars=15)
        assert (
            await recorder.wait_for("via temporal 日本\r".encode())
            == "via temporal 日本\r".encode()
        )

        missing = PaneTarget(target="gone", socket=recorder.pane.socket)
        with pytest.raises(WorkflowFailureError) as caught:
            await client.execute_workflow(
                DeliverOnce.run, deliver(missing), id=f"deliver-{uuid.uuid4()}", task_queue=queue
            )
    # temporalio 1.35 hands a failed *local* activity to the workflow as the activity's own
    # ApplicationError, not wrapped in ActivityError as a normal activity's failure would be.
    types = [getattr(c, "type", None) for c in _causes(caught.value)]
    assert errors.PANE_NOT_FOUND in types


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None:
        chain.append(cause)
        cause = cause.__cause__
    return chain
