"""Following up a typed prompt that no UserPromptSubmit carried, inside the mailbox's workflow.

A few seconds after typing (:data:`~agentcomms.agents.state.FOLLOW_UP_AFTER`), if the agent's
hooks have not said its prompt carried the text, the mailbox reads the pane's input box through
a local activity: the text still there gets Enter pressed once more (once: the mailbox's state
and the pane's own record both say so), gone without a hook means the hooks are missing. What
to do is decided here, in the workflow, and kept in the state it carries, so a worker that dies
in between neither forgets a follow-up nor presses twice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import policies
    from agentcomms.agents.state import FollowUp, looked, to_follow_up
    from agentcomms.models import FollowUpRequest
    from workflows.activities import failure_cause
    from workflows.mailbox import activities
    from workflows.mailbox.models import AgentState


class FollowUps:
    def __init__(self, state: AgentState, publish: Callable[[], None]) -> None:
        self._s = state
        self._publish = publish
        self.stopping = False  # the run continues-as-new: the next one follows up

    async def run(self) -> None:
        while not self.stopping:
            follow_up = self._s.readiness.follow_up
            if follow_up is None or self._s.registration is None:
                await workflow.wait_condition(
                    lambda: (
                        self.stopping
                        or (
                            self._s.readiness.follow_up is not None
                            and self._s.registration is not None
                        )
                    )
                )
                continue
            due = follow_up.at - workflow.now()
            if due > timedelta(0):
                try:
                    await workflow.wait_condition(
                        functools.partial(self._moved_on, follow_up),
                        timeout=due,
                        timeout_summary="no UserPromptSubmit yet: look at the input box",
                    )
                except TimeoutError:
                    pass
                continue
            await self._look(follow_up.pressed)

    def _moved_on(self, follow_up: FollowUp) -> bool:
        """Stopping, or another prompt typed (or this one settled) since."""
        return self.stopping or self._s.readiness.follow_up is not follow_up

    async def _look(self, pressed_before: bool) -> None:
        r, reg = self._s.readiness, self._s.registration
        ids = to_follow_up(r)
        if not ids or reg is None:
            self._s.readiness = r.model_copy(update={"follow_up": None})
            return
        try:
            look = await workflow.execute_local_activity(
                activities.follow_up_prompt,
                FollowUpRequest(
                    registration=reg, event_ids=ids, needle=r.awaiting[ids[0]],
                    press=not pressed_before,
                ),
                start_to_close_timeout=policies.MAILBOX_CHECK_TIMEOUT,
                retry_policy=policies.MAILBOX_CHECK_RETRY,
                summary=f"is {ids[0]} still in {reg.target}'s input box?",
            )  # fmt: skip
        except (ActivityError, ApplicationError) as exc:
            workflow.logger.warning("could not follow %s up: %s", ids[0], failure_cause(exc))
            self._s.readiness = self._s.readiness.model_copy(update={"follow_up": None})
            return
        was = self._s.readiness
        if was.follow_up is not r.follow_up:
            return  # typed again meanwhile: that prompt is followed up instead
        self._s.readiness = looked(was, look.in_box, look.pressed, workflow.now())
        if self._s.readiness.state != was.state or self._s.readiness.pane != was.pane:
            self._publish()
