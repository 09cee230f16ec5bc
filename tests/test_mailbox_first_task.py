"""A mailbox's workflow task that fails after its local activities ran (its worker killed, or the
task timed out) is run again, local activities and all; what they wrote to the projection stays.
A mailbox started afresh recalls its earlier runs' newest registration from that projection: the
retried task must obey its own registration, not take the failed attempt's write of it for an
earlier run's (the agent would stay offline, its messages waiting for ever).

The failure is made where it hurts, faithfully and at once: a worker interceptor raises once in
the workflow task that obeyed the registration, after the projection took the agent's row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio import client as temporal_client
from temporalio import workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import (
    HandleSignalInput,
    Interceptor,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)
from temporalio.workflow import ActivityHandle

from agentcomms.models import ProjectionUpdate
from agentcomms.workflow_ids import mailbox_id
from tests.support.mailbox import every_run, mailbox_replayer, online, record_histories
from tests.support.stack import register, running_stack
from tests.support.tmux import Tmux, as_sent, pane_command, recorder
from tests.support.waiting import eventually


# A client's interceptor that is also a worker's: the stack's workers take it from the client.
class FailAfterRegistrationWritten(temporal_client.Interceptor, Interceptor):
    """Fails, once per mailbox, the workflow task in which a registration was obeyed, once the
    projection has the agent online: as a worker killed right after that write would."""

    def __init__(self) -> None:
        self.failed: set[str] = set()  # the mailboxes whose task failed already

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        failed = self.failed

        class Inbound(WorkflowInboundInterceptor):
            written = False

            def init(self, outbound: WorkflowOutboundInterceptor) -> None:
                super().init(Watch(outbound, self))

            async def handle_signal(self, input: HandleSignalInput) -> None:
                await super().handle_signal(input)
                mailbox = workflow.info().workflow_id
                if input.signal != "register" or mailbox in failed:
                    return
                await workflow.wait_condition(lambda: self.written)
                failed.add(mailbox)
                raise RuntimeError("the worker died after writing the agent's row")

        class Watch(WorkflowOutboundInterceptor):
            def __init__(self, next: WorkflowOutboundInterceptor, inbound: Inbound) -> None:
                super().__init__(next)
                self._inbound = inbound

            def start_local_activity(self, input: StartLocalActivityInput) -> ActivityHandle[Any]:
                handle = super().start_local_activity(input)
                [update] = input.args if input.activity == "record_projection" else [None]
                if isinstance(update, ProjectionUpdate) and update.agent is not None:
                    if update.agent.status == "online":
                        handle.add_done_callback(lambda _: setattr(self._inbound, "written", True))
                return handle

        return Inbound


async def test_a_retried_task_obeys_its_own_registration(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    failing = FailAfterRegistrationWritten()
    config = temporal_env.client.config()
    config["interceptors"] = [failing]
    client = Client(**config)
    async with running_stack(client, tmp_path) as stack:
        agent = stack.agent_id()
        target, out = recorder(tmux, tmp_path, "rec")
        await eventually(lambda: pane_command(tmux, target) == "cat", timeout=5)
        # The registration starts the mailbox: its first registration, in a fresh run.
        await register(stack, agent, tmux, target, submit_delay_ms=0)
        sent = await stack.call("send", agent_id=agent, message="hello", wait=True, timeout=20)
        assert failing.failed == {mailbox_id(agent)}  # the task did fail once
        assert sent["delivered"], sent
        await eventually(lambda: out.read_bytes() == as_sent("hello"))
        state = await online(stack, agent)
        assert state is not None and state.status == "online"
        row = await stack.store.get_agent(agent)
        assert row is not None and row.status == "online" and row.target == target
        histories = await every_run(stack, agent)
        await stack.client.get_workflow_handle(mailbox_id(agent)).terminate("test over")
    # The failed attempt is not in the history: what was recalled, and obeyed after, is.
    for history in histories:
        result = await mailbox_replayer().replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure
    record_histories(histories, "agent-mailbox-first-task-retried")
