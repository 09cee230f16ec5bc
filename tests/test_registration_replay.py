"""Replays are refused: a genuine registration or unregister, copied from a mailbox's history and
signalled again later with the stock `temporal` CLI, changes nothing.

The attack: the agent moved from one pane to another; the pane it left now holds a shell. A
registration of the old pane is still in the history, with the deployment's genuine tag. Before
registrations carried an id and a time, signalling it again pointed the agent's messages back at
the shell. Panes here are real tmux panes (recorders), Temporal a real dev server.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any
from uuid import uuid4

from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agentcomms.temporal import temporal_binary
from agentcomms.workflow_ids import MAILBOX_WORKFLOW, host_task_queue, mailbox_id
from tests.support.attacker import temporal_cli
from tests.support.mailbox import offline, online, signal_payloads
from tests.support.stack import Stack, register
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import eventually
from workflows.mailbox.workflow import AgentWorkflow


async def signalled(stack: Stack, agent: str, name: str) -> list[str]:
    """The JSON of every `name` signal in the mailbox's histories, oldest first: what anyone who
    can read a history (the UI, `temporal workflow show`) can copy. Every run: registered on its
    host, a mailbox continues there as a new run. (The signal that started the mailbox is in its
    start event instead: each test starts it with a message.)"""
    found: list[str] = []
    run_id: str | None = None
    while True:
        handle = stack.client.get_workflow_handle(mailbox_id(agent), run_id=run_id)
        history = await handle.fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        previous = started.continued_execution_run_id
        found = [payload.data.decode() for payload in signal_payloads(history, name)] + found
        if not previous:
            return found
        run_id = previous


def signal_with_the_cli(env: WorkflowEnvironment, agent: str, name: str, payload: str) -> None:
    address = env.client.service_client.config.target_host
    command = [str(temporal_binary()), "workflow", "signal", "--address", address]
    subprocess.run(
        [*command, "-w", mailbox_id(agent), "--name", name, "--input", payload],
        check=True,
        capture_output=True,
    )


def restarted_with(env: WorkflowEnvironment, agent: str, host: str, registration: str) -> None:
    """The attack: the agent's mailbox terminated and started again by hand on its host's queue,
    its first signal a genuine registration of a pane the agent has left."""
    temporal_cli(env, "terminate", "-w", mailbox_id(agent), "--reason", "attack")
    temporal_cli(
        env,
        "signal-with-start",
        "--workflow-id", mailbox_id(agent),
        "--type", "AgentWorkflow",
        "--task-queue", host_task_queue(host),
        "--input", json.dumps({"agent_id": agent}),
        "--signal-name", "register",
        "--signal-input", registration,
    )  # fmt: skip


async def test_an_old_registration_signalled_again_points_nothing_back(
    temporal_env: WorkflowEnvironment, stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    old, old_out = recorder(tmux, tmp_path, "old")
    new, new_out = recorder(tmux, tmp_path, "new")
    await stack.call("send", agent_id=agent, message="one")  # starts the mailbox
    await register(stack, agent, tmux, old, submit_delay_ms=0)
    await eventually(lambda: old_out.read_bytes() == as_sent("one"))
    handle = stack.client.get_workflow_handle_for(AgentWorkflow.run, mailbox_id(agent))
    # The genuine registration of the old pane, as the query shows it to anyone.
    before = await handle.query(AgentWorkflow.state)
    assert before.registration is not None and before.registration.target == old
    copied = before.registration.model_dump_json()
    await register(stack, agent, tmux, new, submit_delay_ms=0)
    assert (await stack.call("send", agent_id=agent, message="two", wait=True))["delivered"]

    # The attack: the old registration, from the query and from the history, signalled again.
    [from_history, _] = await signalled(stack, agent, "register")
    assert json.loads(from_history)["target"] == old
    for payload in (copied, from_history):
        signal_with_the_cli(temporal_env, agent, "register", payload)
    for text in ("three", "four"):  # in turn: each one typed where the mailbox points then
        assert (await stack.call("send", agent_id=agent, message=text, wait=True))["delivered"]
    after = await handle.query(AgentWorkflow.state)
    assert after.registration is not None and after.registration.target == new
    assert after.status == "online"
    await eventually(lambda: new_out.read_bytes() == as_sent("two", "three", "four"))
    assert old_out.read_bytes() == as_sent("one")


async def test_old_registrations_and_unregisters_signalled_again_change_nothing(
    temporal_env: WorkflowEnvironment, stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    """The newest of an agent's registrations and unregisters wins, whatever arrives later."""
    agent = stack.agent_id()
    target, out = recorder(tmux, tmp_path, "rec")
    await stack.call("send", agent_id=agent, message="first")  # starts the mailbox
    await register(stack, agent, tmux, target, submit_delay_ms=0)
    await eventually(lambda: out.read_bytes() == as_sent("first"))
    await stack.call("unregister", agent_id=agent)
    await eventually(lambda: offline(stack, agent))
    handle = stack.client.get_workflow_handle_for(AgentWorkflow.run, mailbox_id(agent))
    [registration] = await signalled(stack, agent, "register")
    [unregister] = await signalled(stack, agent, "unregister")

    # A registration older than the unregister does not bring the agent back online.
    signal_with_the_cli(temporal_env, agent, "register", registration)
    waits = await stack.call("send", agent_id=agent, message="waits", wait=True, timeout=1)
    assert waits["delivered"] is False
    assert await offline(stack, agent)
    # Registered again, the agent gets it; an unregister older than that takes it offline no more.
    await register(stack, agent, tmux, target, submit_delay_ms=0)
    await eventually(lambda: out.read_bytes() == as_sent("first", "waits"))
    signal_with_the_cli(temporal_env, agent, "unregister", unregister)
    for text in ("still", "here"):
        assert (await stack.call("send", agent_id=agent, message=text, wait=True))["delivered"]
    state = await handle.query(AgentWorkflow.state)
    assert state.status == "online" and state.registration is not None
    await eventually(lambda: out.read_bytes() == as_sent("first", "waits", "still", "here"))


async def test_a_registration_made_before_they_carried_a_time_is_refused_with_a_clear_error(
    temporal_env: WorkflowEnvironment, stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    target, out = recorder(tmux, tmp_path, "rec")
    await register(stack, agent, tmux, target, submit_delay_ms=0)
    handle = stack.client.get_workflow_handle_for(AgentWorkflow.run, mailbox_id(agent))
    state = await eventually(lambda: online(stack, agent))
    assert state.registration is not None
    # As a registration looked before: no id, no time (its tag cannot check out either way).
    old = state.registration.model_dump(mode="json", exclude={"id", "registered_at"})
    signal_with_the_cli(temporal_env, agent, "register", json.dumps(old))

    async def refused() -> str | None:
        error = (await handle.query(AgentWorkflow.state)).last_error
        return error if error and "before registrations carried" in error else None

    error = await eventually(refused)
    assert "agentcomms agents register" in error
    # The registration it had stands: messages are typed as before.
    assert (await stack.call("send", agent_id=agent, message="fine", wait=True))["delivered"]
    await eventually(lambda: out.read_bytes() == as_sent("fine"))


async def test_a_mailbox_terminated_and_started_afresh_obeys_and_types_nothing_old(
    temporal_env: WorkflowEnvironment, stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    """The attack: terminate the mailbox and start it afresh with the stock CLI, so that a run
    that remembers nothing takes a registration of the pane the agent left (now a shell) and a
    message already typed, both genuine, copied from the old run's history."""
    agent = stack.agent_id()
    old, old_out = recorder(tmux, tmp_path, "old")
    new, new_out = recorder(tmux, tmp_path, "new")
    await stack.call("send", agent_id=agent, message="one")  # starts the mailbox
    await register(stack, agent, tmux, old, submit_delay_ms=0)
    await eventually(lambda: old_out.read_bytes() == as_sent("one"))
    await register(stack, agent, tmux, new, submit_delay_ms=0)
    assert (await stack.call("send", agent_id=agent, message="two", wait=True))["delivered"]
    await eventually(lambda: new_out.read_bytes() == as_sent("two"))
    [old_registration, _] = await signalled(stack, agent, "register")
    [two] = [e for e in await signalled(stack, agent, "enqueue") if '"two"' in e]

    async def newest_registration_recorded() -> bool:
        row = await stack.store.get_agent(agent)
        return row is not None and row.target == new

    await eventually(newest_registration_recorded)
    host = json.loads(old_registration)["host"]
    restarted_with(temporal_env, agent, host, old_registration)
    # A message sent now waits for a pane the deployment registered after the one it left.
    await stack.call("send", agent_id=agent, message="meanwhile")
    # The agent itself comes back in a pane of its own (its hooks register it again).
    newer, newer_out = recorder(tmux, tmp_path, "newer")
    await register(stack, agent, tmux, newer, submit_delay_ms=0)
    handle = stack.client.get_workflow_handle_for(AgentWorkflow.run, mailbox_id(agent))
    signal_with_the_cli(temporal_env, agent, "register", old_registration)
    signal_with_the_cli(temporal_env, agent, "enqueue", two)
    assert (await stack.call("send", agent_id=agent, message="three", wait=True))["delivered"]
    state = await handle.query(AgentWorkflow.state)
    assert state.registration is not None and state.registration.target == newer
    await eventually(lambda: newer_out.read_bytes() == as_sent("meanwhile", "three"))
    assert old_out.read_bytes() == as_sent("one")
    assert new_out.read_bytes() == as_sent("two")


async def test_a_mailbox_started_afresh_with_a_forged_carried_state_obeys_none_of_it(
    temporal_env: WorkflowEnvironment, stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    """The attack: terminate the mailbox and start it with the state a run carries through
    continue-as-new, forged: the genuine registration of the pane the agent left (now a shell),
    a newest-registration time far ahead (so no later registration would count), online."""
    agent = stack.agent_id()
    old, old_out = recorder(tmux, tmp_path, "old")
    new, new_out = recorder(tmux, tmp_path, "new")
    await stack.call("send", agent_id=agent, message="one")  # starts the mailbox
    await register(stack, agent, tmux, old, submit_delay_ms=0)
    await eventually(lambda: old_out.read_bytes() == as_sent("one"))
    await register(stack, agent, tmux, new, submit_delay_ms=0)
    assert (await stack.call("send", agent_id=agent, message="two", wait=True))["delivered"]
    [old_registration, _] = await signalled(stack, agent, "register")
    host = json.loads(old_registration)["host"]
    forged = {
        "agent_id": agent,
        "task_queue": host_task_queue(host),
        "state": {
            "agent_id": agent,
            "task_queue": host_task_queue(host),
            "registration": json.loads(old_registration),
            "pane_changed_at": "2999-01-01T00:00:00Z",
            "status": "online",
        },
    }
    temporal_cli(temporal_env, "terminate", "-w", mailbox_id(agent), "--reason", "attack")
    temporal_cli(
        temporal_env,
        "start",
        "--workflow-id", mailbox_id(agent),
        "--type", "AgentWorkflow",
        "--task-queue", host_task_queue(host),
        "--input", json.dumps(forged),
    )  # fmt: skip
    await stack.call("send", agent_id=agent, message="meanwhile")
    # The agent comes back in a pane of its own: registered now, it counts.
    newer, newer_out = recorder(tmux, tmp_path, "newer")
    await register(stack, agent, tmux, newer, submit_delay_ms=0)
    assert (await stack.call("send", agent_id=agent, message="three", wait=True))["delivered"]
    await eventually(lambda: newer_out.read_bytes() == as_sent("meanwhile", "three"))
    assert old_out.read_bytes() == as_sent("one")
    assert new_out.read_bytes() == as_sent("two")


async def test_a_mailbox_started_for_another_agent_writes_nothing_of_that_agents(
    temporal_env: WorkflowEnvironment, stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    """The attack: a mailbox of the attacker's (`agent-<anything>`) started for the agent,
    whose row it would write as it knows it, forgetting the newest registration's time; then the
    agent's own mailbox terminated and started afresh with the registration of the pane the
    agent left (now a shell), which a mailbox started afresh would take for the newest."""
    agent = stack.agent_id()
    old, old_out = recorder(tmux, tmp_path, "old")
    new, new_out = recorder(tmux, tmp_path, "new")
    await stack.call("send", agent_id=agent, message="one")  # starts the mailbox
    await register(stack, agent, tmux, old, submit_delay_ms=0)
    await eventually(lambda: old_out.read_bytes() == as_sent("one"))
    await register(stack, agent, tmux, new, submit_delay_ms=0)
    assert (await stack.call("send", agent_id=agent, message="two", wait=True))["delivered"]
    [old_registration, _] = await signalled(stack, agent, "register")
    host = json.loads(old_registration)["host"]

    async def newest_registration_recorded() -> bool:
        row = await stack.store.get_agent(agent)
        return row is not None and row.target == new

    await eventually(newest_registration_recorded)
    decoy = f"{agent}-decoy"
    temporal_cli(
        temporal_env,
        "start",
        "--workflow-id", mailbox_id(decoy),
        "--type", "AgentWorkflow",
        "--task-queue", host_task_queue(host),
        "--input", json.dumps({"agent_id": agent}),
    )  # fmt: skip
    decoy_handle = stack.client.get_workflow_handle_for(AgentWorkflow.run, mailbox_id(decoy))

    async def decoy_wrote() -> bool:
        state = await decoy_handle.query(AgentWorkflow.state)
        return state.unrecorded == 0

    await eventually(decoy_wrote)
    assert await newest_registration_recorded()
    restarted_with(temporal_env, agent, host, old_registration)
    await stack.call("send", agent_id=agent, message="meanwhile")
    newer, newer_out = recorder(tmux, tmp_path, "newer")
    await register(stack, agent, tmux, newer, submit_delay_ms=0)
    assert (await stack.call("send", agent_id=agent, message="three", wait=True))["delivered"]
    await eventually(lambda: newer_out.read_bytes() == as_sent("meanwhile", "three"))
    assert old_out.read_bytes() == as_sent("one")
    assert new_out.read_bytes() == as_sent("two")
    await decoy_handle.terminate()


@workflow.defn(sandboxed=False)
class HandsOver:
    """The attacker's own workflow, on a queue of theirs: it continues-as-new into an agent's
    mailbox, on the host's queue, with a state of their making."""

    @workflow.run
    async def run(self, queue: str, forged: dict[str, Any]) -> None:
        workflow.continue_as_new(args=[forged], workflow=MAILBOX_WORKFLOW, task_queue=queue)


async def test_a_forged_state_handed_over_by_continue_as_new_obeys_none_of_it(
    temporal_env: WorkflowEnvironment, stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    """As the attack above, but the forged state comes the way a real one does: through
    continue-as-new, from a workflow of the attacker's own under the mailbox's id."""
    agent = stack.agent_id()
    old, old_out = recorder(tmux, tmp_path, "old")
    new, new_out = recorder(tmux, tmp_path, "new")
    await stack.call("send", agent_id=agent, message="one")  # starts the mailbox
    await register(stack, agent, tmux, old, submit_delay_ms=0)
    await eventually(lambda: old_out.read_bytes() == as_sent("one"))
    await register(stack, agent, tmux, new, submit_delay_ms=0)
    assert (await stack.call("send", agent_id=agent, message="two", wait=True))["delivered"]
    [old_registration, _] = await signalled(stack, agent, "register")
    host_queue = host_task_queue(json.loads(old_registration)["host"])
    forged = {
        "agent_id": agent,
        "task_queue": host_queue,
        "state": {
            "agent_id": agent,
            "task_queue": host_queue,
            "registration": json.loads(old_registration),
            "pane_changed_at": "2999-01-01T00:00:00Z",
            "status": "online",
        },
    }
    temporal_cli(temporal_env, "terminate", "-w", mailbox_id(agent), "--reason", "attack")
    own_queue = f"attacker-{uuid4().hex[:8]}"
    async with Worker(stack.client, task_queue=own_queue, workflows=[HandsOver]):
        await stack.client.start_workflow(
            HandsOver.run, args=[host_queue, forged], id=mailbox_id(agent), task_queue=own_queue
        )

        async def handed_over() -> bool:
            described = await stack.client.get_workflow_handle(mailbox_id(agent)).describe()
            return described.workflow_type == MAILBOX_WORKFLOW

        await eventually(handed_over)
    await stack.call("send", agent_id=agent, message="meanwhile")
    await asyncio.sleep(1.5)  # long enough for it to have been typed where the state points
    newer, newer_out = recorder(tmux, tmp_path, "newer")
    await register(stack, agent, tmux, newer, submit_delay_ms=0)
    sent = await stack.call("send", agent_id=agent, message="three", wait=True)
    assert sent["delivered"]
    await eventually(lambda: newer_out.read_bytes() == as_sent("meanwhile", "three"))
    assert old_out.read_bytes() == as_sent("one")
    assert new_out.read_bytes() == as_sent("two")
