"""What a mailbox obeys: registrations and unregisters the deployment signed, newest only; hook
reports the gateway signed; and nothing a run started afresh forgot.

Anyone who reaches Temporal can signal a mailbox, and a genuine registration can be copied from a
history and signalled again once the agent has moved on, pointing its messages back at a pane
that now holds a shell. So each registration and unregister carries the time the deployment made
it (inside what it signs), and the mailbox obeys one only when it is newer than every one obeyed
before: an older one, or one obeyed already, changes nothing. The tag is checked by the worker
(a local activity) before the time counts, so a forgery dated far ahead cannot shut out the
genuine registrations after it.

A hook report ("ready", "busy", "waiting for a dialog") decides when messages are typed, so the
gateway signs it too and the mailbox applies only one whose tag the worker checked: a forged
"ready" would have messages typed into a dialog. It is counted, for `agentcomms trace`.

A mailbox's workflow can be terminated and started afresh, and the fresh run would remember
neither the newest registration it obeyed nor the messages it typed: a genuine old registration
or message signalled into it would be obeyed, or typed, again. So a run that did not come from
continue-as-new first asks the projection (:class:`Recall`) before it obeys a registration or
types anything, and ends that workflow task there, so what it recalled is in its history: a
retried task replays it instead of reading back what the failed attempt wrote (the run's own
registration, which it would take for an earlier run's). Workflow code: runs inside the
mailbox's handlers and at the start of its run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import errors, policies
    from agentcomms.agents.state import HookReport, beside_its_turn
    from agentcomms.agents.state import apply as apply_report
    from agentcomms.models import RecallRequest, Registration, Unregister
    from workflows.activities import failure_cause
    from workflows.mailbox import activities
    from workflows.mailbox.models import AgentInput, AgentState

if TYPE_CHECKING:
    from workflows.mailbox.queue import Queue

Change = TypeVar("Change", Registration, Unregister)

# Marks the runs that keep their recall in the history before obeying anything; runs started
# before it recall and obey in one workflow task, and replay so.
RECALL_KEPT_PATCH = "recall-kept-before-obeying"
# Marks the runs that check (and so apply) a hook report older than the state when it still
# says something: the UserPromptSubmit that carried a message the mailbox recorded typing only
# after the agent took it. Runs started before it dropped those reports unchecked.
LATE_REPORTS_PATCH = "late-reports-checked"
# Marks the runs that pass over Codex's reports beside the agent's turn (the SessionStart that
# trails its first prompt, the notify of the thread that writes the task's title); runs started
# before it applied them (the agent shown ready mid-turn), and replay so.
BESIDE_THE_TURN_PATCH = "codex-reports-beside-its-turn"


class Recall:
    """What a run started afresh learns from the projection before it obeys or types anything:
    the time of the newest registration or unregister the agent's earlier runs obeyed, and the
    messages they typed lately (an older copy is caught where it would be typed)."""

    def __init__(self, state: AgentState, queue: Queue, *, fresh: bool) -> None:
        self._s = state
        self._queue = queue
        # A run that continued-as-new carries all of it in its state.
        self.done = not fresh

    async def run(self) -> None:
        if self.done:
            return
        # Checked before any activity: after a local activity a workflow task may split (a query
        # answered while it ran) and replay the check elsewhere.
        keep = workflow.patched(RECALL_KEPT_PATCH)
        # Until the projection answers, nothing is obeyed or typed: it is the only memory of a
        # terminated run outside Temporal's history.
        recalled = await workflow.execute_local_activity(
            activities.recall_mailbox,
            RecallRequest(agent_id=self._s.agent_id),
            start_to_close_timeout=policies.PROJECTION_TIMEOUT,
            retry_policy=policies.PROJECTION_RETRY,
            summary="recall what the agent's earlier runs obeyed and typed",
        )
        if keep:
            # The recall is kept in the history before anything is obeyed or written: a workflow
            # task that fails (its worker killed, or it timed out) runs its local activities
            # again, but their writes stay, and a recall run again would read this run's own
            # registration back as an earlier run's, refuse it, and leave the agent offline.
            # The task ends here, so the retried one replays what this run recalled.
            await workflow.sleep(timedelta(milliseconds=1), summary="keep what was recalled")
        at = recalled.pane_changed_at
        if at is not None and not _newer(self._s, at):
            at = None
        if at is not None:
            self._s.pane_changed_at = at
        for event_id in reversed(recalled.typed_ids):  # oldest first, as they were seen
            if self._queue.position(event_id) is not None:
                workflow.logger.warning(
                    "%s was typed for %s by an earlier run: not typed twice",
                    event_id,
                    self._s.agent_id,
                )
                self._queue.settle(event_id, "delivered")
            if not self._queue.seen(event_id):
                self._queue.remember(event_id)
        self.done = True


def carried_state(input: AgentInput) -> AgentState | None:
    """The state this run takes from its input: only one a run of this mailbox handed over by
    continuing-as-new. Anyone can start a mailbox with a state of their making (a genuine
    registration of the pane the agent left, a newest-registration time far ahead, messages
    marked typed); a run started so is a run started afresh, and learns from the projection."""
    if input.state is None:
        return None
    if workflow.info().continued_run_id is None:
        workflow.logger.warning(
            "ignored the state %s's mailbox was started with: only a run that continued-as-new "
            "carries one (someone started it by hand?); starting afresh from the projection",
            input.agent_id,
        )
        return None
    if input.state.agent_id != input.agent_id:
        workflow.logger.warning(
            "ignored the state of %s carried into %s's mailbox; starting afresh from the "
            "projection",
            input.state.agent_id,
            input.agent_id,
        )
        return None
    state, started = input.state, workflow.info().workflow_start_time
    if state.pane_changed_at is not None and state.pane_changed_at > started:
        # No registration the run before obeyed was made after this run started: a state that
        # says so was made to have the agent's next registrations ignored. Those made since
        # this run started count (the host types into no pane older than the newest signed).
        workflow.logger.warning(
            "%s's mailbox was handed a newest registration time after its run started (%s): "
            "registrations made since %s count",
            input.agent_id,
            state.pane_changed_at.isoformat(),
            started.isoformat(),
        )
        state.pane_changed_at = started
    return state


async def genuine_report(state: AgentState, report: HookReport) -> bool:
    """Whether to apply a hook report: the gateway signed it for this agent (the worker checks
    the tag). One the agent's state has passed already is not checked when applying it changes
    nothing; one that still does (its prompt carried a message typed since its hook started,
    or it names the dialog already open) is. Codex's SessionStart that trails its first prompt
    is not applied at all. A forged one is counted and named for `agentcomms trace`."""
    if beside_its_turn(state.readiness, report) and workflow.patched(BESIDE_THE_TURN_PATCH):
        return False
    if report.at_ns <= state.readiness.at_ns:
        if apply_report(state.readiness, report, workflow.now()) is None:
            return False
        if not workflow.patched(LATE_REPORTS_PATCH):
            return False  # runs from before late reports counted replay without checking them
    try:
        genuine = await workflow.execute_local_activity(
            activities.check_report,
            report,
            start_to_close_timeout=policies.MAILBOX_CHECK_TIMEOUT,
            retry_policy=policies.MAILBOX_CHECK_RETRY,
            summary=f"check the tag of a hook report ({report.event})",
        )
    except (ActivityError, ApplicationError):
        genuine = False  # unchecked is unsigned: the agent's state stays as it is
    if not genuine:
        workflow.logger.warning(
            "ignored a %s hook report not signed by this deployment; %s stays as it is",
            report.event,
            state.agent_id,
        )
        state.refused_reports += 1
        state.last_refused_report = f"{report.event} at {workflow.now().isoformat('T', 'seconds')}"
    return genuine


async def newest(
    state: AgentState,
    check: Callable[[Change], Awaitable[bool]],
    change: Change,
    recall: Recall,
) -> bool:
    """Whether to obey `change`: signed by the deployment (`check` asks the worker), and newer
    than every registration or unregister obeyed so far (by this run, by earlier runs as the
    projection recalls them), also one that came while it was checked. When it is, it becomes
    the newest."""
    await workflow.wait_condition(lambda: recall.done)
    what = "registration" if isinstance(change, Registration) else "unregister"
    at = change.registered_at if isinstance(change, Registration) else change.requested_at
    # One without a time is the worker's to refuse: it says why (made before they had one).
    if at is not None and not _newer(state, at):
        workflow.logger.warning("ignored an old or repeated %s of %s", what, state.agent_id)
        return False
    try:
        genuine = await workflow.execute_local_activity(
            check,
            change,
            start_to_close_timeout=policies.MAILBOX_CHECK_TIMEOUT,
            retry_policy=policies.MAILBOX_CHECK_RETRY,
            summary=f"check the {what}'s tag",
        )
    except (ActivityError, ApplicationError) as exc:
        genuine = False  # unchecked is unsigned: the agent stays as it is
        cause = failure_cause(exc)
        if isinstance(cause, ApplicationError) and cause.type == errors.REGISTRATION_NOT_SIGNED:
            # Shown by `agentcomms agents`: e.g. made before registrations carried a time, or
            # signed with another key than this host's worker holds.
            state.last_error = cause.message
    if not genuine or at is None:
        workflow.logger.warning(
            "ignored a %s not signed by this deployment; %s stays as it is", what, state.agent_id
        )
        return False
    if not _newer(state, at):
        return False
    state.pane_changed_at = at
    return True


def _newer(state: AgentState, at: datetime) -> bool:
    return state.pane_changed_at is None or at > state.pane_changed_at
