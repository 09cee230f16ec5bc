"""Which registrations and unregisters a mailbox obeys: those the deployment signed, newest only.

Anyone who reaches Temporal can signal a mailbox, and a genuine registration can be copied from a
history and signalled again once the agent has moved on, pointing its messages back at a pane
that now holds a shell. So each registration and unregister carries the time the deployment made
it (inside what it signs), and the mailbox obeys one only when it is newer than every one obeyed
before: an older one, or one obeyed already, changes nothing. The tag is checked by the worker
(a local activity) before the time counts, so a forgery dated far ahead cannot shut out the
genuine registrations after it. Workflow code: runs inside the mailbox's handlers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import errors, policies
    from agentcomms.models import Registration, Unregister
    from workflows.activities import failure_cause
    from workflows.mailbox.models import AgentState

Change = TypeVar("Change", Registration, Unregister)


async def newest(
    state: AgentState, check: Callable[[Change], Awaitable[bool]], change: Change
) -> bool:
    """Whether to obey `change`: signed by the deployment (`check` asks the worker), and newer
    than every registration or unregister obeyed so far, also one that came while it was checked.
    When it is, it becomes the newest."""
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
