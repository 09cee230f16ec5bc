"""Where a process agent's mailbox runs: on its host's queue from its registration on, because
that host's worker runs the agent (a pane agent's host has nothing to do before a message).

A registration is checked by whichever worker runs the mailbox when it comes, and the check
starts a process agent only on the agent's own host: for an agent on another host, not the
worker that checked. So the mailbox moves to the host at once, and a run that begins there has
the host's worker check the registration again, which starts the agent: its state is known, and
its permission requests asked, before its first message.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import policies
    from agentcomms.models import Registration
    from agentcomms.workflow_ids import host_task_queue
    from workflows.mailbox import activities
    from workflows.mailbox.models import AgentState


# Runs started before process agents moved to their host at registration replay as they ran.
PATCH = "process-agent-runs-on-its-host"


class ProcessHost:
    """A process agent's mailbox moving to its host at registration, and the agent started
    there; nothing for a pane agent, nor for a run begun before this was so."""

    def __init__(self, state: AgentState) -> None:
        self._s = state
        self._on = False

    async def begin(self) -> None:
        """At the start of a run, after the recall: on the agent's host, start it."""
        self._on = workflow.patched(PATCH)
        if self._on:
            await start_on_its_host(self._s)

    def moves_now(self, checking: int) -> bool:
        """A process agent's registration, checked, names another host than this run's queue."""
        reg = self._s.registration
        return (
            self._on
            and reg is not None
            and reg.type == "process"
            and not checking
            and self._s.task_queue != host_task_queue(reg.host)
        )

    async def before_moving(self, reg: Registration) -> None:
        """A process agent's mailbox moves in the workflow task that took its registration: a
        timer ends that task first, so the registration is in the history, and a signal that
        comes while the move is made retries only the move (a retried first task would find
        the registration it took recorded, and ignore it as one it had seen)."""
        if self._on and reg.type == "process":
            await workflow.sleep(timedelta(milliseconds=1))


async def start_on_its_host(state: AgentState) -> None:
    """On a process agent's host, have the worker check its registration: that starts it (one
    that runs already is left as it is)."""
    reg = state.registration
    if reg is None or reg.type != "process" or state.task_queue != host_task_queue(reg.host):
        return
    try:
        await workflow.execute_local_activity(
            activities.check_registration,
            reg,
            start_to_close_timeout=policies.MAILBOX_CHECK_TIMEOUT,
            retry_policy=policies.MAILBOX_CHECK_RETRY,
            summary="start the process agent on its host",
        )
    except (ActivityError, ApplicationError) as exc:
        # Its first message starts it, or says why it cannot.
        workflow.logger.warning("process agent %s not started: %s", state.agent_id, exc)
