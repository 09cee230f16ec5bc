"""AgentWorkflow: one long-running workflow per agent; signals are its mailbox.

The workflow runs on its agent's host task queue (``agentcomms-host-<host>``) and types through a
local activity, because the pane lives on that host; an agent registered on another host moves
there by continuing-as-new onto that host's queue. A message for an agent that is not registered,
or whose pane is missing, waits here, in order, until it can be typed.

What the workflow carries stays small whatever waits: its state holds each waiting message's id
and kind, not its text (:mod:`.queue`). A text lives in the history of the run that received it
and in the projection; a few short ones travel in the continue-as-new state, a larger backlog is
written to the projection first and read back in bounded batches as it is typed. Projection
writes run beside the typing and never hold it up (:mod:`.projection`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import errors, policies
    from agentcomms.agents.state import HookReport
    from agentcomms.models import (
        DeliverRequest,
        DeliveryOutcome,
        Event,
        InterruptRequest,
        LoadRequest,
        Registration,
        Unregister,
    )
    from agentcomms.search_attributes import AGENT_ID, AGENT_STATE, AGENT_STATUS
    from agentcomms.workflow_ids import MAILBOX_WORKFLOW, host_task_queue
    from workflows.activities import failure_cause, failure_reason
    from workflows.mailbox import activities, process_host
    from workflows.mailbox.checks import Change, Recall, carried_state, genuine_report, newest
    from workflows.mailbox.follow_ups import FollowUps
    from workflows.mailbox.models import (
        AgentInput,
        AgentSnapshot,
        AgentState,
        DeliveryStatus,
        MailboxAccount,
        Outcome,
        QueuedEvent,
        WaitForDelivery,
    )
    from workflows.mailbox.projection import (
        CHUNK_CHARS,
        Owed,
        account,
        agent_row,
        settled_event,
        snapshot,
    )
    from workflows.mailbox.queue import INTERRUPT_EXPIRED, Queue, expired_interrupt
    from workflows.mailbox.readiness import NOT_READY_CAP, TOGETHER_MAX, Watch
    from workflows.mailbox.receipts import Receipts, from_chat
    from workflows.mailbox.writer import ProjectionWriter

# A missing pane is retried with capped exponential backoff.
RETRY_FIRST = timedelta(milliseconds=500)
RETRY_CAP = timedelta(seconds=30)
# Local activities keep a workflow task open, and signals that arrive meanwhile (an interrupt)
# are seen only when it ends. A backlog is therefore typed in batches of about this much typing
# time, each ended by a 1 ms timer; measured before: an interrupt waited 6.9 s behind 39 messages.
BATCH_BUDGET_MS = 500
DELIVERY_COST_MS = 20  # a delivery's own time, beside its submit delay
# How many waiting texts a run reads back from the projection at a time (fewer when long).
LOAD_BATCH = 50


# Outside the sandbox: every message passes through this workflow, and the sandbox re-enters
# itself for each payload a workflow task carries (measured: about 5 of 20 ms of CPU per message,
# and the module copies it keeps per cached mailbox). Its determinism is checked instead by
# replaying recorded histories inside the sandbox (tests/test_agent_workflow_replay.py).
@workflow.defn(name=MAILBOX_WORKFLOW, sandboxed=False)
class AgentWorkflow:
    @workflow.init
    def __init__(self, input: AgentInput) -> None:
        carried = carried_state(input)
        self._s = carried or AgentState(
            agent_id=input.agent_id, task_queue=input.task_queue or workflow.info().task_queue
        )
        self._queue = Queue(self._s)
        self._owed = Owed(self._s.unrecorded)
        self._writer = ProjectionWriter(self._owed)
        self._watch = Watch(self._s)
        self._follow_ups = FollowUps(self._s, self._publish)
        self._receipts = Receipts(self._s)
        self._s.unrecorded = []
        # Wakes the delivery loop early from a backoff sleep (new registration, new message).
        self._nudged = False
        self._continuing = False
        # The status and agent's state last upserted as search attributes in this run.
        self._indexed: tuple[str, str] | None = None
        self._batch_ms = 0  # typing time spent in the current workflow task
        self._checking = 0  # registrations and unregisters being checked
        # What a run started afresh learns first (:mod:`.checks`): nothing obeyed or typed twice.
        self._recall = Recall(self._s, self._queue, fresh=carried is None)
        self._host = process_host.ProcessHost(self._s)

    # ---- mailbox -------------------------------------------------------------------------------

    @workflow.signal
    def enqueue(self, event: Event) -> None:
        """Accept a message or interrupt for this agent; duplicates (same event id) are ignored."""
        if self._queue.seen(event.id):
            return
        self._queue.remember(event.id)
        self._nudged = True
        refused = self._queue.add(event)
        if refused is not None:
            self._owed.owe(event.model_copy(update={"status": "rejected", "error": refused}))
            self._owed.flush()

    @workflow.signal
    async def report(self, report: HookReport) -> None:
        """What the agent's own hooks say it does (through the gateway): its state, in order."""
        if not await genuine_report(self._s, report):
            return
        applied, shown = self._watch.report(report, workflow.now())
        self._nudged = self._nudged or applied
        if shown:
            self._publish()

    @workflow.signal
    async def register(self, registration: Registration) -> None:
        error = self._s.last_error
        if not await self._newest(activities.check_registration, registration):
            if self._s.last_error != error:
                self._publish()  # why it was refused, for `agentcomms agents`
            return
        self._s.registration = registration
        self._s.status = "online"
        self._s.unreachable_since = None
        self._s.last_error = None
        self._nudged = True
        self._publish()  # the projection keeps the newest pane, and when it was registered

    @workflow.signal
    async def unregister(self, request: Unregister) -> None:
        if not await self._newest(activities.check_unregister, request):
            return
        self._s.registration = None
        self._s.status = "offline"
        self._s.unreachable_since = None
        self._nudged = True

    async def _newest(self, check: Callable[[Change], Awaitable[bool]], change: Change) -> bool:
        """Whether to obey a registration or unregister (:mod:`.checks`). Messages wait while it
        is checked: one sent after it must not be typed into the pane it replaces."""
        self._checking += 1
        try:
            return await newest(self._s, check, change, self._recall)
        finally:
            self._checking -= 1

    @workflow.update
    async def wait_for_delivery(self, request: WaitForDelivery) -> DeliveryStatus:
        """Answer once the event is typed (or failed, or also submitted if asked), or queued."""
        event_id, done, asked = request.event_id, self._queue.outcome, request.submitted
        try:
            await workflow.wait_condition(
                lambda: self._continuing or self._watch.settled(event_id, done(event_id), asked),
                timeout=timedelta(seconds=request.timeout_s),
            )
        except TimeoutError:
            pass
        if (settled := done(event_id)) is not None:
            outcome, note = settled
            error = self._s.last_error if outcome == "failed" else None
            return DeliveryStatus(
                event_id=event_id, status=outcome, error=error, note=note,
                submitted=self._watch.submitted(event_id),
            )  # fmt: skip
        if self._continuing:
            # The caller asks the next run (same workflow id) again.
            return DeliveryStatus(event_id=event_id, status="moved")
        queued = self._queue.position(event_id) is not None
        return DeliveryStatus(event_id=event_id, status="queued" if queued else "unknown")

    @workflow.query
    def state(self) -> AgentSnapshot:
        return snapshot(self._s, len(self._queue), self._owed.unrecorded())

    @workflow.query
    def account(self) -> MailboxAccount:
        """What the projection shows of this mailbox: to rebuild a projection that was lost."""
        return account(self._s, self._owed, workflow.now())

    @workflow.query
    def queued(self, event_id: str) -> QueuedEvent | None:
        """Where a message stands in the queue; None once it no longer waits."""
        position = self._queue.position(event_id)
        if position is None:
            return None
        held = self._queue.held(event_id)
        return QueuedEvent(
            position=position,
            waiting=len(self._queue),
            attempts=held.attempts if held is not None else 0,
            tries=self._queue.tries(event_id),
        )

    # ---- the delivery loop -----------------------------------------------------------------------

    @workflow.run
    async def run(self, input: AgentInput) -> None:
        await self._recall.run()
        await self._host.begin()
        writer = asyncio.create_task(self._writer.run())
        beside = [asyncio.create_task(t.run()) for t in (self._follow_ups, self._receipts)]
        self._publish()
        backoff = RETRY_FIRST
        while True:
            await workflow.wait_condition(
                lambda: (
                    self._deliverable()
                    or workflow.info().is_continue_as_new_suggested()
                    or self._stale_row()
                    or self._host.moves_now(self._checking)
                )
            )
            if workflow.info().is_continue_as_new_suggested():
                break
            reg = self._s.registration
            if reg is not None and self._s.task_queue != host_task_queue(reg.host):
                # The pane lives on another host: continue there, where typing is local.
                self._s.task_queue = host_task_queue(reg.host)
                await self._host.before_moving(reg)
                break
            if not self._deliverable():
                self._publish()  # e.g. unregistered, or an offline agent's queue grew
                continue
            assert reg is not None
            if not self._watch.may_type(self._queue.first().type, reg, workflow.now()):
                await self._wait_for_readiness()
                continue
            event = await self._next_event()
            if event is None:
                continue
            self._nudged = False
            room = (BATCH_BUDGET_MS - self._batch_ms) // (reg.submit_delay_ms + DELIVERY_COST_MS)
            if self._watch.together(reg):
                room = TOGETHER_MAX  # one prompt, one submit
            batch = [event, *self._queue.behind(event, room=room - 1)]
            try:
                outcomes = await self._deliver(batch, reg)
            except (ActivityError, ApplicationError) as exc:
                if self._failed(event, exc):
                    # Sleep, but wake at once for a re-registration, new work or a hook.
                    try:
                        await workflow.wait_condition(lambda: self._nudged, timeout=backoff)
                    except TimeoutError:
                        pass
                    cap = NOT_READY_CAP if self._s.readiness.pane else RETRY_CAP
                    backoff = min(backoff * 2, cap)
                continue
            backoff = RETRY_FIRST
            if self._watch.typed(workflow.now(), batch[: len(outcomes)]):
                self._publish()
            # Fewer outcomes than messages: those left wait, and go first next time.
            for typed, outcome in zip(batch, outcomes, strict=False):
                if outcome is not None and outcome.rejected is not None:
                    self._settle(typed, "rejected", error=outcome.rejected)
                    continue
                note = outcome.cut_note(reg.max_chars) if outcome else None
                recorded = outcome is not None and outcome.recorded
                self._settle(typed, "delivered", note=note, recorded=recorded)
                if from_chat(typed):
                    await self._receipts.typed(typed, note)
            await self._end_batch_if_due(reg, typed=len(outcomes))
        self._follow_ups.stopping = self._receipts.stopping = True
        await asyncio.gather(*beside)
        await self._continue_as_new(writer)

    def _failed(self, event: Event, exc: ActivityError | ApplicationError) -> bool:
        """Settle or keep the first message of a batch whose delivery failed; True when it
        waits for its pane (the loop backs off)."""
        cause = failure_cause(exc)
        kind = cause.type if isinstance(cause, ApplicationError) else None
        # The sentence alone: the kind is in `kind`, and people read this in `agents`.
        message = failure_reason(exc)
        if kind == errors.PANE_NOT_READY:
            # Nothing typed: the pane showed a dialog, copy mode, a running turn or a shell.
            # Not a failure: the message waits for the agent, and a hook or another look ends it.
            if self._watch.pane_refused(message, cause, workflow.now()):
                self._publish()
            return True
        if kind == errors.NOT_SIGNED:
            # Not sent by this deployment (or altered since): never typed, never retried.
            self._settle(event, "rejected", error=message)
            return False
        # A pane whose registration the host cannot verify is no pane to type into: the
        # messages wait, as for a missing pane, until the agent is registered again.
        if kind in (errors.PANE_NOT_FOUND, errors.TMUX_FAILED, errors.REGISTRATION_NOT_SIGNED):
            event.attempts += 1  # the projection shows how hard we tried
            self._queue.record_try(event.id, workflow.now(), message)
            self._mark_unreachable(message)
            self._owed.flush()
            return True
        self._settle(event, "failed", error=message)
        return False

    async def _next_event(self) -> Event | None:
        """The first waiting event with its text, or None when it was settled instead (an
        interrupt too old to press, a text lost); reads a batch back from the projection when
        this run does not hold it (it arrived before the last continue-as-new)."""
        first = self._queue.first()
        if self._queue.held(first.id) is None:
            await self._load_texts()
        event = self._queue.held(first.id)
        if event is None:
            # Never expected: the text was in the projection before the state let go of it.
            lost = first.lost(self._s.agent_id, workflow.now())
            self._settle(lost, "failed", error="its text is missing from the projection")
            return None
        if expired_interrupt(event, workflow.now()):
            self._settle(event, "failed", error=INTERRUPT_EXPIRED)
            return None
        return event

    async def _load_texts(self) -> None:
        ids = self._queue.without_text(LOAD_BATCH)
        loaded = await workflow.execute_local_activity(
            activities.load_waiting_events,
            LoadRequest(agent_id=self._s.agent_id, event_ids=ids, max_chars=CHUNK_CHARS),
            start_to_close_timeout=policies.PROJECTION_TIMEOUT,
            retry_policy=policies.PROJECTION_RETRY,
            summary=f"read {len(ids)} waiting texts",
        )
        # A text the projection lost is settled as failed by _next_event when its turn comes.
        for event in loaded.events:
            self._queue.hold(event)

    async def _end_batch_if_due(self, reg: Registration, *, typed: int) -> None:
        if not self._queue:
            self._batch_ms = 0  # the loop now waits, which ends the workflow task anyway
            self._owed.flush()
            return
        self._batch_ms += (reg.submit_delay_ms + DELIVERY_COST_MS) * typed
        if self._batch_ms >= BATCH_BUDGET_MS:
            self._batch_ms = 0
            self._owed.flush()
            await workflow.sleep(timedelta(milliseconds=1), summary="let new signals in")

    async def _wait_for_readiness(self) -> None:
        """Wait for a hook, new work, or the state old enough for the pane to decide."""
        if self._stale_row():
            self._publish()
        self._nudged = False
        try:
            await workflow.wait_condition(
                lambda: self._nudged or workflow.info().is_continue_as_new_suggested(),
                timeout=self._watch.stale_in(workflow.now()),
                timeout_summary="the agent's state is stale: look at its pane",
            )
        except TimeoutError:
            pass

    def _deliverable(self) -> bool:
        return bool(self._queue) and self._s.registration is not None and not self._checking

    async def _continue_as_new(self, writer: asyncio.Task[None]) -> None:
        self._continuing = True
        self._s.unrecorded = await self._writer.before_continuing(self._queue.hand_over())
        await writer  # it ended between writes
        # Let waiting updates answer "moved" before this run ends.
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            AgentInput(agent_id=self._s.agent_id, state=self._s), task_queue=self._s.task_queue
        )

    async def _deliver(self, batch: list[Event], reg: Registration) -> list[DeliveryOutcome | None]:
        """Type the messages in order in one local activity; the outcomes of the first of them
        (None for an interrupt, which has no text)."""
        first = batch[0]
        if first.type == "interrupt":
            await workflow.execute_local_activity(
                activities.interrupt_pane,
                InterruptRequest(registration=reg, event=first),
                start_to_close_timeout=policies.MAILBOX_INTERRUPT_TIMEOUT,
                retry_policy=policies.MAILBOX_DELIVERY_RETRY,
                summary=f"press {reg.interrupt_key} in {reg.target}",
            )
            return [None]
        # The delivery records itself when it is all that waits and nothing else is owed
        # (messages that come one at a time, or the end of a backlog): one local activity, not two.
        # Not while the projection is failing: the mailbox's own writes wait for it, typing not.
        records = (
            len(self._queue) == len(batch)
            and not self._owed
            and not self._owed.failing
            and self._owed.writing is None
            and self._s.status == "online"
        )
        settled = [self._settled(e, "delivered") for e in batch] if records else []
        hold_ms = self._queue.hold_after(batch)
        typing = (
            f"type {first.id} into {reg.target}"
            if len(batch) == 1
            else f"type {len(batch)} messages ({first.id} …) into {reg.target}"
        )
        outcomes = await workflow.execute_local_activity(
            activities.deliver_to_pane,
            DeliverRequest(
                registration=reg,
                events=batch,
                settled=settled,
                look=self._watch.look(reg, workflow.now()),
                together=self._watch.together(reg),
                hold_ms=hold_ms,
            ),
            start_to_close_timeout=policies.MAILBOX_DELIVERY_TIMEOUT,
            retry_policy=policies.MAILBOX_DELIVERY_RETRY,
            summary=f"{typing}, then hold {hold_ms} ms for the burst" if hold_ms else typing,
        )
        return list(outcomes)

    def _settle(
        self,
        event: Event,
        outcome: Outcome,
        *,
        error: str | None = None,
        note: str | None = None,
        recorded: bool = False,
    ) -> None:
        """Take the event out of the queue and remember what became of it; `recorded` when its
        delivery wrote it to the projection already."""
        if not recorded:
            self._owed.owe(self._settled(event, outcome, error=error, note=note))
        # What a waiting `send --wait` shows of a refusal.
        self._queue.settle(
            event.id, outcome, note=note or (error if outcome == "rejected" else None)
        )
        s = self._s
        was = s.status
        if outcome == "delivered":
            s.last_delivered_event_id = event.id
            s.delivered_count += 1
            s.status = "online"
            s.unreachable_since = None
            s.last_error = None
        elif outcome == "failed":
            s.last_error = error
        # The agent row is written when what it shows changes (status, error, and the count that
        # waits once the queue drains): the loop sees a stale row and publishes it.
        if outcome != "delivered" or s.status != was:
            self._publish()

    def _settled(
        self, event: Event, outcome: Outcome, *, error: str | None = None, note: str | None = None
    ) -> Event:
        return settled_event(
            event, outcome, workflow.now(), self._queue.tries(event.id), error, note
        )

    def _mark_unreachable(self, error: str) -> None:
        s = self._s
        changed = s.last_error != error or self._owed.shown != ("unreachable", len(self._queue))
        if s.unreachable_since is None:
            s.unreachable_since = workflow.now()
        s.status = "unreachable"
        s.last_error = error
        if changed:
            self._publish()

    def _stale_row(self) -> bool:
        """The agent row shows another status, or (once the queue drained) another count."""
        shown = self._owed.shown
        waiting = len(self._queue)
        if shown is None or shown[0] != self._s.status:
            return True
        return shown[1] != waiting and (waiting == 0 or not self._deliverable())

    def _publish(self) -> None:
        """Show the agent's state in the Temporal UI, and owe the projection its agent row."""
        s, reg = self._s, self._s.registration
        waiting = len(self._queue)
        self._owed.shown = (s.status, waiting)
        where = reg.target if reg else "no pane"
        details = f"{s.status}: {waiting} pending, pane {where}"
        if s.status == "unreachable" and s.unreachable_since:
            details += f" missing since {s.unreachable_since.isoformat(timespec='seconds')}"
        details += "\n" + self._watch.details()
        if s.last_error:
            details += f"\nlast error: {s.last_error}"
        workflow.set_current_details(details)
        if (indexed := (s.status, s.readiness.state)) != self._indexed:
            status, state = AGENT_STATUS.value_set(s.status), AGENT_STATE.value_set(indexed[1])
            workflow.upsert_search_attributes([AGENT_ID.value_set(s.agent_id), status, state])
            self._indexed = indexed
        self._owed.agent = agent_row(s, waiting, workflow.now())
        self._owed.flush()
