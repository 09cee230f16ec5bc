"""The mailbox's projection writes, beside the typing: what :mod:`.projection` states as the
rule, done with local activities for a run's whole life.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import policies
    from agentcomms.models import Event, ProjectionUpdate
    from workflows.activities import failure_cause
    from workflows.mailbox import activities
    from workflows.mailbox.projection import Owed, chunks


class ProjectionWriter:
    def __init__(self, owed: Owed) -> None:
        self.owed = owed
        self._stopping = False

    async def run(self) -> None:
        """Write what is owed, one write at a time, until the run continues-as-new; a failed
        write is kept and tried again after a backoff."""
        while True:
            await workflow.wait_condition(
                lambda: (bool(self.owed) and self.owed.due) or self._stopping
            )
            if self._stopping:
                return  # the run writes what is left itself, before continuing-as-new
            if not await self.write_once():
                try:
                    await workflow.wait_condition(
                        lambda: self._stopping, timeout=self.owed.next_backoff()
                    )
                except TimeoutError:
                    pass

    async def write_once(self) -> bool:
        """One write of what is owed (a chunk, the agent row with the last one); False when the
        projection refused it (it is owed still)."""
        while self.owed.writing:  # the background write, when the run continues-as-new meanwhile
            await workflow.wait_condition(lambda: self.owed.writing is None)
        if not self.owed:
            return True
        events, agent = self.owed.take()
        what = [f"{len(events)} events"] if events else []
        if agent is not None:
            what.append(f"agent {agent.status}")
        try:
            await workflow.execute_local_activity(
                activities.record_projection,
                ProjectionUpdate(events=events, agent=agent),
                start_to_close_timeout=policies.MAILBOX_RECORD_TIMEOUT,
                retry_policy=policies.MAILBOX_RECORD_RETRY,
                summary="record " + ", ".join(what),
            )
        except (ActivityError, ApplicationError) as exc:
            self.owed.put_back()
            workflow.logger.warning(
                "the projection took nothing (%s); %d events owed, typing goes on",
                failure_cause(exc),
                self.owed.unrecorded(),
            )
            return False
        self.owed.written()
        return True

    async def before_continuing(self, waiting: list[Event]) -> list[Event]:
        """Stop writing in the background, keep the `waiting` texts the next run reads back,
        and write what is owed; what the projection could not take, for the next run to carry."""
        self._stopping = True
        for chunk in chunks(waiting):
            await workflow.execute_local_activity(
                activities.record_projection,
                ProjectionUpdate(waiting=chunk),
                start_to_close_timeout=policies.PROJECTION_TIMEOUT,
                retry_policy=policies.PROJECTION_RETRY,
                summary=f"keep {len(chunk)} waiting texts",
            )
        await self.write_once()
        carried = self.owed.carried()
        if self.owed.events and not carried:
            # Too much to carry: the next run must not start without it, so wait for the
            # projection (a long outage under a heavy flow).
            while self.owed:
                await workflow.sleep(self.owed.next_backoff(), summary="wait for the projection")
                await self.write_once()
        return carried
