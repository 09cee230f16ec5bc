"""Determinism and backoff of AgentWorkflow.

- Replayer over a live history and over a recorded one (tests/histories/), so a change that makes
  old histories non-deterministic fails here, not in a user's running mailbox.
- Capped backoff for a missing pane over skipped time, on the time-skipping test server.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.delivery import PaneActivities
from activities.projection import ProjectionActivities
from agentcomms.models import Event, Registration
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from agentcomms.workflow_ids import host_task_queue, mailbox_id
from tests.support.mailbox import (
    every_run,
    local_activities,
    mailbox_replayer,
    offline,
    record_histories,
    settled_history,
    unreachable,
)
from tests.support.stack import running_stack
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import eventually
from workflows.mailbox.models import AgentInput
from workflows.mailbox.workflow import AgentWorkflow

HISTORIES = Path(__file__).parent / "histories"


async def test_a_live_history_replays_deterministically(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path) as stack:
        agent = stack.agent_id()
        for i in range(3):
            await stack.call("send", agent_id=agent, message=f"r{i}")
        target, out = recorder(tmux, tmp_path, "rec")
        await stack.call(
            "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
        )
        await stack.call("interrupt", agent_id=agent)
        # The interrupt overtakes whatever is still queued when it arrives.
        await eventually(
            lambda: sorted(out.read_bytes()) == sorted(b"\x03" + as_sent("r0", "r1", "r2"))
        )
        # Unregistered, a message waits; registered again, it is typed.
        await stack.call("unregister", agent_id=agent)
        await eventually(lambda: offline(stack, agent))
        await stack.call("send", agent_id=agent, message="r3")
        await stack.call(
            "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
        )
        await eventually(lambda: out.read_bytes().endswith(as_sent("r3")))
        handle = stack.client.get_workflow_handle(mailbox_id(agent))
        # Replay a history that ends between workflow tasks: one cut inside a task that is still
        # running (or force-closed by a terminate) is not a history the worker could produce.
        history = await eventually(lambda: settled_history(handle))
        await handle.terminate("test over")
    result = await mailbox_replayer().replay_workflow(history)
    assert result.replay_failure is None
    record_histories([history], "agent-mailbox")


async def test_recorded_histories_still_replay() -> None:
    files = sorted(HISTORIES.glob("*.json"))
    assert files, "tests/histories holds at least one recorded mailbox history"
    for path in files:
        history = WorkflowHistory.from_json(path.stem, path.read_text())
        result = await mailbox_replayer().replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"


@pytest.mark.timeout(120)
async def test_a_missing_pane_is_retried_with_capped_backoff(
    time_skipping_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    client = time_skipping_env.client
    host = f"ts-{uuid.uuid4().hex[:8]}"
    agent = f"ts-{host}"
    async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}") as store:
        key = DeploymentKey(b"t" * 40)
        projection = ProjectionActivities(store, key)
        panes = PaneActivities(key, store)
        async with Worker(
            client,
            task_queue=host_task_queue(host),
            workflows=[AgentWorkflow],
            activities=[
                panes.deliver_to_pane,
                panes.check_registration,
                projection.record_projection,
                projection.recall_mailbox,
            ],
        ):
            tmux.new_session("keep")
            handle = await client.start_workflow(
                AgentWorkflow.run,
                AgentInput(agent_id=agent, task_queue=host_task_queue(host)),
                id=mailbox_id(agent),
                task_queue=host_task_queue(host),
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
            await handle.signal(
                AgentWorkflow.register,
                key.sign_registration(
                    agent,
                    Registration(
                        target="later:0.0", socket=tmux.socket, host=host, submit_delay_ms=0
                    ),
                ),
            )
            await handle.signal(
                AgentWorkflow.enqueue,
                key.sign_event(
                    Event(
                        id="evt_ts1",
                        agent_id=agent,
                        channel_id="cli:local",
                        type="human_message",
                        role="human",
                        payload={"text": "patience"},
                    )
                ),
            )
            await time_skipping_env.sleep(timedelta(minutes=20))
            state = await handle.query(AgentWorkflow.state)
            assert state.status == "unreachable" and state.pending == 1
            history = await handle.fetch_history()
            timers = sum(1 for e in history.events if e.HasField("timer_started_event_attributes"))
            # Backoff 0.5 s, 1 s, 2 s … capped at 30 s: ~45 retries in 20 minutes, so neither a
            # hot loop nor given up.
            assert 35 <= timers <= 50, timers
            out = tmp_path / "later.bytes"
            out.touch()
            tmux.new_session("later", f"stty raw -echo; exec cat >> {out}")
            await time_skipping_env.sleep(timedelta(seconds=31))
            await eventually(lambda: out.read_bytes() == b"[cli:local] patience\r")
            await handle.terminate("test over")


@pytest.mark.timeout(120)
async def test_unreachable_and_continued_runs_replay(
    temporal_env_low_can: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    """Every run of a mailbox that waited for a missing pane and continued-as-new replays."""
    async with running_stack(temporal_env_low_can.client, tmp_path) as stack:
        agent = stack.agent_id()
        tmux.new_session("keep")
        await stack.call(
            "register", agent_id=agent, target="late:0.0", socket=tmux.socket, submit_delay_ms=0
        )
        await stack.call("send", agent_id=agent, message="w0")
        await eventually(lambda: unreachable(stack, agent))
        out = tmp_path / "late.bytes"
        out.touch()
        tmux.new_session("late", f"stty raw -echo; exec cat >> {out}")
        for i in range(1, 60):
            await stack.call("send", agent_id=agent, message=f"w{i}")
        await eventually(lambda: out.read_bytes().count(b"\r") == 60, timeout=90)
        histories = await every_run(stack, agent)
        assert len(histories) >= 2
        await stack.client.get_workflow_handle(mailbox_id(agent)).terminate("test over")
    for history in histories:
        result = await mailbox_replayer().replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure
    record_histories(histories, "agent-mailbox-unreachable-continued")


@pytest.mark.timeout(120)
async def test_a_backlog_handed_over_through_the_projection_replays(
    temporal_env_low_can: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    """Too many waiting texts to carry in the state: each run writes them to the projection
    before continuing-as-new, and the run that types them reads them back, in order."""
    async with running_stack(temporal_env_low_can.client, tmp_path) as stack:
        agent = stack.agent_id()
        count = 260  # past the 200 a run hands over in its state
        for i in range(count):
            await stack.call("send", agent_id=agent, message=f"h{i}")
        target, out = recorder(tmux, tmp_path, "rec")
        await stack.call(
            "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
        )
        expected = as_sent(*(f"h{i}" for i in range(count)))
        await eventually(lambda: out.read_bytes() == expected, timeout=90)
        histories = await every_run(stack, agent)
        assert len(histories) >= 3
        loaded = [h for h in histories if "load_waiting_events" in local_activities(h)]
        assert loaded, "a run read waiting texts back from the projection"
        await stack.client.get_workflow_handle(mailbox_id(agent)).terminate("test over")
    for history in histories:
        result = await mailbox_replayer().replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure
    record_histories(loaded, "agent-mailbox-texts-read-back")
