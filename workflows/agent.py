"""AgentWorkflow: one long-running workflow per agent (``agent-<agent_id>``); signals are its mailbox.

The workflow runs on its agent's host task queue (``agentcomms-host-<host>``) and types through a
local activity, because the pane lives on that host; an agent registered on another host moves
there by continuing-as-new onto that host's queue. A message for an agent that is not registered,
or whose pane is missing, waits here, in order, until it can be typed.

What the workflow carries stays small whatever waits: its state holds each waiting message's id
and kind, not its text. A text lives in the history of the run that received it (so in memory,
and again after a replay) and in the projection; before continuing-as-new the mailbox makes sure
every waiting text is in the projection, and the next run reads them back from there in bounded
batches as it types them. Projection writes go in bounded chunks too, so no payload grows with
a backlog (Temporal fails a workflow task whose payload passes its limit, 2 MB on the dev server,
and keeps failing it).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcomms import errors
    from agentcomms.bridge.sanitize import pane_text
    from agentcomms.models import (
        Agent,
        AgentStatus,
        DeliverBatch,
        DeliverRequest,
        DeliveryOutcome,
        Event,
        EventType,
        InterruptRequest,
        LoadedEvents,
        LoadRequest,
        PaneTarget,
        ProjectionUpdate,
        Registration,
        Try,
        Unregister,
    )
    from agentcomms.search_attributes import AGENT_ID, AGENT_STATUS
    from workflows.outbox import QueueReceipt, receipt_item

# How many recently seen event ids to remember for de-duplication (carried across continue-as-new).
SEEN_IDS_KEPT = 2000
# How many recent outcomes to remember so a waiting `send --wait` can learn what happened.
OUTCOMES_KEPT = 500
# The failed attempts kept per waiting message, latest last (`trace` shows them; the count of
# all attempts is kept beside them).
TRIES_KEPT = 10
# A missing pane is retried with capped exponential backoff.
RETRY_FIRST = timedelta(milliseconds=500)
RETRY_CAP = timedelta(seconds=30)
# Local activities keep a workflow task open, and signals that arrive meanwhile (an interrupt)
# are seen only when it ends. A backlog is therefore typed in batches of about this much typing
# time, each ended by a 1 ms timer; measured before: an interrupt waited 6.9 s behind 39 messages.
BATCH_BUDGET_MS = 500
DELIVERY_COST_MS = 20  # a delivery's own time, beside its submit delay
# Patch: search attributes are upserted only when the status changes (each upsert is a history
# event and a visibility write; before, one was made every time the queue drained). Histories
# recorded before it replay on the old path.
PATCH_INDEX_ON_CHANGE = "index-status-on-change"
# Patch: waiting texts are written to the projection before continuing-as-new, since the state
# no longer carries them.
PATCH_TEXTS_OUT_OF_STATE = "texts-out-of-state"
# Patch: the agent row is written when the queue drains only if what it shows changed (before,
# on every drain: one more write per message when messages come one at a time).
PATCH_ROW_ON_CHANGE = "agent-row-on-change"
# Patch: a mailbox moves to its pane's host when registered there, not at its first message
# (it starts on the shared queue, which the gateway's machine may not poll).
PATCH_MOVE_ON_REGISTER = "move-on-register"
# Patch: a few short waiting texts travel in the continue-as-new state instead of through the
# projection, so moving to another host (or a new run) does not wait for the database.
PATCH_SMALL_TEXTS_IN_STATE = "small-texts-in-state"
# Patch: an unregister takes effect only once the worker has checked its tag with the deployment
# key (which a workflow must not hold); before, any unregister signal took the agent offline.
PATCH_SIGNED_UNREGISTER = "signed-unregister"
# Patch: the delivery of the one message that waits writes it to the projection itself (the
# mailbox wrote it with a local activity of its own after each delivery).
PATCH_DELIVERY_RECORDS = "delivery-records-itself"
# Patch: the mailbox that typed a chat message asks for its "typed" receipt (before, a gateway
# watched for it, and one restarted meanwhile never sent it).
PATCH_TYPED_RECEIPT = "typed-receipt-from-mailbox"
# Every patch the mailbox checks. A run that says so in its input checks them all in its first
# activation, before any local activity. Checked later, right after a local activity, a patch
# can replay differently: a query answered while the activity runs makes the worker complete the
# workflow task early, so the activity's result (and the check after it) comes in the next task,
# while a replay, which reads the marker with the first task, sees the check in the first one,
# before Temporal has told it of the patch (its markers are told per workflow task).
# Patch: the messages that wait behind the one being typed go with it, in one local activity
# (and as few tmux clients as can carry them), as many as the batch's typing time allows; before,
# one local activity each. Only in runs that check their patches first (see PATCHES).
PATCH_BACKLOG_IN_BATCHES = "backlog-typed-in-batches"
PATCHES = (
    PATCH_INDEX_ON_CHANGE,
    PATCH_TEXTS_OUT_OF_STATE,
    PATCH_ROW_ON_CHANGE,
    PATCH_MOVE_ON_REGISTER,
    PATCH_SMALL_TEXTS_IN_STATE,
    PATCH_SIGNED_UNREGISTER,
    PATCH_DELIVERY_RECORDS,
    PATCH_TYPED_RECEIPT,
    PATCH_BACKLOG_IN_BATCHES,
)
INLINE_TEXT_CHARS = 50_000  # with JSON's worst case, about 300 KB of state
INLINE_WAITING = 200

# A projection write or read carries at most about this many characters of message text; with
# JSON's worst case (6 bytes for an escaped character) and one whole message at the cap, a
# payload stays well under the server's 2 MB.
CHUNK_CHARS = 150_000
# Past this many waiting messages the mailbox refuses more (recorded as rejected, never typed).
# The gateway refuses far earlier, at the configured per-agent limit; this is the backstop for
# signals that went around it, and keeps the continue-as-new input under the payload limit.
HARD_WAITING_CAP = 12_000  # about 75 bytes each in the state: under 1 MB
# How many waiting texts a run reads back from the projection at a time (fewer when long).
LOAD_BATCH = 50
# At most this much text is typed in one local activity (its input carries each text twice).
BATCH_TEXT_CHARS = 20_000

DELIVERY_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=2),
    maximum_attempts=3,
    # A missing pane is the workflow's business (it waits and marks the agent unreachable).
    non_retryable_error_types=[errors.PANE_NOT_FOUND, errors.INVALID_TARGET],
)
# A tag check is a computation: if it cannot run, the request it checks is ignored.
CHECK_RETRY = RetryPolicy(maximum_attempts=3)
PROJECTION_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=100),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
)
RECEIPT_QUEUE_GIVE_UP = timedelta(seconds=30)


def host_task_queue(host: str) -> str:
    return f"agentcomms-host-{host}"


class Waiting(BaseModel):
    """A message in the queue as the state carries it: its text is elsewhere (memory, projection)."""

    id: str
    type: EventType
    # The whole event, when the run that continued-as-new handed the text over in its state
    # (a few short messages) rather than through the projection.
    event: Event | None = None


class AgentInput(BaseModel):
    agent_id: str
    task_queue: str | None = None  # the queue the starter chose: this host's
    state: AgentState | None = None  # set when continuing-as-new
    # Started by a starter that knows PATCHES are checked first (runs started before did not).
    patches_first: bool = False


class AgentState(BaseModel):
    """Everything the mailbox must not forget, carried through continue-as-new."""

    agent_id: str
    # Where this run's tasks go. Kept in state rather than read from workflow.info(): a
    # Replayer runs histories on a made-up queue, and this must replay exactly.
    task_queue: str | None = None
    registration: Registration | None = None
    status: AgentStatus = "offline"
    waiting: list[Waiting] = Field(default_factory=list)
    seen_ids: list[str] = Field(default_factory=list)
    # event id -> delivered | failed | rejected
    outcomes: dict[str, str] = Field(default_factory=dict)
    notes: dict[str, str] = Field(default_factory=dict)  # event id -> what typing it changed
    tries: dict[str, list[Try]] = Field(default_factory=dict)  # waiting event id -> failed tries
    last_delivered_event_id: str | None = None
    last_error: str | None = None
    unreachable_since: datetime | None = None
    delivered_count: int = 0
    patches_first: bool = False  # this run checks every patch in its first activation

    @model_validator(mode="before")
    @classmethod
    def _from_runs_that_carried_texts(cls, data: Any) -> Any:
        # Older runs continued-as-new with every waiting event, text included, under "pending".
        if isinstance(data, dict) and "pending" in data:
            data = dict(data)
            data["waiting"] = [
                {"id": e["id"], "type": e["type"], "event": e} for e in data.pop("pending")
            ]
        return data


class WaitForDelivery(BaseModel):
    event_id: str
    timeout_s: float = Field(default=10, gt=0, le=300)


class DeliveryStatus(BaseModel):
    event_id: str
    status: Literal["delivered", "failed", "rejected", "queued", "unknown", "moved"]
    error: str | None = None
    note: str | None = None  # e.g. that the agent's max_chars cut the text


class AgentSnapshot(BaseModel):
    """What the `state` query answers: enough to tell a human why a message has not arrived."""

    agent_id: str
    status: AgentStatus
    registration: Registration | None
    pending: int
    last_delivered_event_id: str | None
    last_error: str | None
    unreachable_since: datetime | None
    delivered_count: int


class QueuedEvent(BaseModel):
    """What the `queued` query answers about one waiting message (`agentcomms trace`)."""

    position: int  # 1: the next one typed
    waiting: int  # how many wait in all
    attempts: int  # failed tries to type it in this run (a missing pane)
    tries: list[Try] = Field(default_factory=list)  # the latest of them, with their errors


AgentInput.model_rebuild()


# Outside the sandbox: every message passes through this workflow, and the sandbox re-enters
# itself for each payload a workflow task carries (measured: about 5 of 20 ms of CPU per message,
# and the module copies it keeps per cached mailbox). Its determinism is checked instead by
# replaying recorded histories inside the sandbox (tests/test_agent_workflow_replay.py).
@workflow.defn(name="AgentWorkflow", sandboxed=False)
class AgentWorkflow:
    @workflow.init
    def __init__(self, input: AgentInput) -> None:
        self._s = input.state or AgentState(
            agent_id=input.agent_id,
            task_queue=input.task_queue or workflow.info().task_queue,
            patches_first=input.patches_first,
        )
        self._patches = (
            {patch: workflow.patched(patch) for patch in PATCHES} if self._s.patches_first else None
        )
        self._seen = set(self._s.seen_ids)
        # The texts of waiting messages this run holds: those it received (its history has them
        # too) and those read back from the projection. The state carries only ids.
        self._texts: dict[str, Event] = {}
        for entry in self._s.waiting:
            if entry.event is not None:
                self._texts[entry.id] = entry.event
                entry.event = None
        # Wakes the delivery loop early from a backoff sleep (new registration, new message).
        self._nudged = False
        self._continuing = False
        # The status and waiting count the projection last saw; kept current while messages
        # cannot move (while they flow, the row is written when the queue drains).
        self._published: tuple[str, int] | None = None
        self._indexed_status: str | None = None  # AgentStatus as last upserted in this run
        self._batch_ms = 0  # typing time spent in the current workflow task
        # Settled events not yet in the projection: written once per batch, not once per message.
        self._unsettled: list[Event] = []

    def _patched(self, patch: str) -> bool:
        """Whether this run takes the patched path: checked at its start (see PATCHES), or, in
        runs started before that, where the path forks."""
        if self._patches is not None:
            return self._patches[patch]
        return workflow.patched(patch)

    # ---- mailbox -------------------------------------------------------------------------------

    @workflow.signal
    def enqueue(self, event: Event) -> None:
        """Accept a message or interrupt for this agent; duplicates (same event id) are ignored."""
        if event.id in self._seen:
            return
        self._remember(event.id)
        self._nudged = True
        if len(self._s.waiting) >= HARD_WAITING_CAP:
            self._unsettled.append(
                event.model_copy(
                    update={
                        "status": "rejected",
                        "error": f"mailbox full: {len(self._s.waiting)} messages wait already",
                    }
                )
            )
            return
        self._texts[event.id] = event
        entry = Waiting(id=event.id, type=event.type)
        if event.type == "interrupt":
            # An interrupt overtakes queued messages, but not earlier interrupts.
            index = next(
                (i for i, w in enumerate(self._s.waiting) if w.type != "interrupt"),
                len(self._s.waiting),
            )
            self._s.waiting.insert(index, entry)
        else:
            self._s.waiting.append(entry)

    @workflow.signal
    def register(self, registration: Registration) -> None:
        self._s.registration = registration
        self._s.status = "online"
        self._s.unreachable_since = None
        self._s.last_error = None
        self._nudged = True

    @workflow.signal
    async def unregister(self, request: Unregister) -> None:
        if self._patched(PATCH_SIGNED_UNREGISTER) and not await self._unregister_checked(
            request
        ):
            return
        self._s.registration = None
        self._s.status = "offline"
        self._s.unreachable_since = None
        self._nudged = True

    async def _unregister_checked(self, request: Unregister) -> bool:
        """Whether to obey the unregister: the worker found it signed by the deployment, it is
        not a repeat of one obeyed already, and no registration came while it was checked."""
        if request.id and request.id in self._seen:
            return False
        registration = self._s.registration
        try:
            genuine = await workflow.execute_local_activity(
                "check_unregister",
                request,
                result_type=bool,
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=CHECK_RETRY,
                summary="check the unregister's tag",
            )
        except ActivityError:
            genuine = False  # unchecked is unsigned: the agent stays as it is
        if not genuine:
            workflow.logger.warning(
                "ignored an unregister not signed by this deployment; %s stays registered",
                self._s.agent_id,
            )
            return False
        self._remember(request.id)
        return self._s.registration is registration

    @workflow.update
    async def wait_for_delivery(self, request: WaitForDelivery) -> DeliveryStatus:
        """Answer once the event is typed (or failed), or say it is still queued at the timeout."""

        def settled() -> bool:
            return request.event_id in self._s.outcomes or self._continuing

        try:
            await workflow.wait_condition(settled, timeout=timedelta(seconds=request.timeout_s))
        except TimeoutError:
            pass
        outcome = self._s.outcomes.get(request.event_id)
        if outcome is not None:
            error = self._s.last_error if outcome == "failed" else None
            return DeliveryStatus(
                event_id=request.event_id,
                status=outcome,
                error=error,
                note=self._s.notes.get(request.event_id),
            )
        if self._continuing:
            # The caller asks the next run (same workflow id) again.
            return DeliveryStatus(event_id=request.event_id, status="moved")
        queued = any(w.id == request.event_id for w in self._s.waiting)
        return DeliveryStatus(event_id=request.event_id, status="queued" if queued else "unknown")

    @workflow.query
    def state(self) -> AgentSnapshot:
        s = self._s
        return AgentSnapshot(
            agent_id=s.agent_id,
            status=s.status,
            registration=s.registration,
            pending=len(s.waiting),
            last_delivered_event_id=s.last_delivered_event_id,
            last_error=s.last_error,
            unreachable_since=s.unreachable_since,
            delivered_count=s.delivered_count,
        )

    @workflow.query
    def queued(self, event_id: str) -> QueuedEvent | None:
        """Where a message stands in the queue; None once it no longer waits."""
        for i, entry in enumerate(self._s.waiting):
            if entry.id == event_id:
                held = self._texts.get(event_id)
                return QueuedEvent(
                    position=i + 1,
                    waiting=len(self._s.waiting),
                    attempts=held.attempts if held is not None else 0,
                    tries=self._s.tries.get(event_id, []),
                )
        return None

    # ---- the delivery loop -----------------------------------------------------------------------

    @workflow.run
    async def run(self, input: AgentInput) -> None:
        await self._publish()
        backoff = RETRY_FIRST
        while True:
            await workflow.wait_condition(
                lambda: (
                    self._deliverable()
                    or self._continue_as_new_suggested()
                    or self._stale_projection()
                    or bool(self._unsettled)  # e.g. a message refused past the hard cap
                )
            )
            if self._continue_as_new_suggested():
                break
            reg = self._s.registration
            if (
                reg is not None
                and self._s.task_queue != host_task_queue(reg.host)
                and (self._deliverable() or self._patched(PATCH_MOVE_ON_REGISTER))
            ):
                # The pane lives on another host: continue there, where typing is local.
                self._s.task_queue = host_task_queue(reg.host)
                await self._continue_as_new(task_queue=self._s.task_queue)
            if not self._deliverable():
                await self._publish()  # e.g. unregistered, or an offline agent's queue grew
                continue
            assert reg is not None
            event = await self._next_event()
            if event is None:
                continue
            self._nudged = False
            batch = [event, *self._typed_with(event, reg)]
            try:
                outcomes: list[DeliveryOutcome | None]
                record = self._delivery_records(batch)
                if len(batch) > 1:
                    outcomes = list(await self._deliver_batch(batch, reg, record=record))
                else:
                    outcomes = [await self._deliver(event, reg, record=record)]
            except (ActivityError, ApplicationError) as exc:
                # A local activity's failure may arrive bare or wrapped in an ActivityError.
                cause = exc.cause if isinstance(exc, ActivityError) else exc
                kind = cause.type if isinstance(cause, ApplicationError) else None
                # The sentence alone: the kind is in `kind`, and people read this in `agents`.
                message = (
                    cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
                )
                if kind == errors.NOT_SIGNED:
                    # Not sent by this deployment (or altered since): never typed, never retried.
                    await self._settle(event, "rejected", error=message)
                    continue
                # A pane whose registration the host cannot verify is no pane to type into: the
                # messages wait, as for a missing pane, until the agent is registered again.
                if kind in (
                    errors.PANE_NOT_FOUND,
                    errors.TMUX_FAILED,
                    errors.REGISTRATION_NOT_SIGNED,
                ):
                    event.attempts += 1  # the projection shows how hard we tried
                    self._record_try(event.id, message)
                    await self._mark_unreachable(message)
                    await self._write_projection()
                    # Sleep, but wake at once for a re-registration or new work.
                    try:
                        await workflow.wait_condition(lambda: self._nudged, timeout=backoff)
                    except TimeoutError:
                        pass
                    backoff = min(backoff * 2, RETRY_CAP)
                    continue
                await self._settle(event, "failed", error=message)
                continue
            backoff = RETRY_FIRST
            # Fewer outcomes than messages: those left wait, and go first next time.
            for typed, outcome in zip(batch, outcomes, strict=False):
                if outcome is not None and outcome.rejected is not None:
                    await self._settle(typed, "rejected", error=outcome.rejected)
                    continue
                note = outcome.cut_note(reg.max_chars) if outcome else None
                await self._settle(
                    typed,
                    "delivered",
                    note=note,
                    recorded=outcome is not None and outcome.recorded,
                )
                if _from_chat(typed) and self._patched(PATCH_TYPED_RECEIPT):
                    await self._typed_receipt(typed, note)
            await self._end_batch_if_due(reg, typed=len(outcomes))
        await self._continue_as_new()

    async def _next_event(self) -> Event | None:
        """The first waiting event with its text; reads a batch back from the projection when
        this run does not hold it (it arrived before the last continue-as-new)."""
        first = self._s.waiting[0]
        if first.id not in self._texts:
            await self._load_texts()
        event = self._texts.get(first.id)
        if event is None:
            # Never expected: the text was in the projection before the state let go of it.
            gone = Event(
                id=first.id,
                agent_id=self._s.agent_id,
                channel_id="",
                type=first.type,
                role="system",
            )
            await self._settle(gone, "failed", error="its text is missing from the projection")
            return None
        return event

    async def _load_texts(self) -> None:
        ids = [w.id for w in self._s.waiting if w.id not in self._texts][:LOAD_BATCH]
        loaded = await workflow.execute_local_activity(
            "load_waiting_events",
            LoadRequest(agent_id=self._s.agent_id, event_ids=ids, max_chars=CHUNK_CHARS),
            result_type=LoadedEvents,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=PROJECTION_RETRY,
            summary=f"read {len(ids)} waiting texts",
        )
        # A text the projection lost is settled as failed by _next_event when its turn comes.
        for event in loaded.events:
            self._texts[event.id] = event

    def _typed_with(self, first: Event, reg: Registration) -> list[Event]:
        """The messages that wait right behind `first`, to be typed in the same local activity:
        those this run holds, within what is left of the batch's typing time."""
        if first.type == "interrupt" or not self._batches_backlogs():
            return []
        room = (BATCH_BUDGET_MS - self._batch_ms) // (reg.submit_delay_ms + DELIVERY_COST_MS)
        chars = len(first.text)
        behind: list[Event] = []
        for entry in self._s.waiting[1:room]:
            event = self._texts.get(entry.id)
            if event is None or event.type == "interrupt":
                break
            chars += len(event.text)
            if chars > BATCH_TEXT_CHARS:
                break
            behind.append(event)
        return behind

    def _batches_backlogs(self) -> bool:
        # Never checked mid-run: a run that checks its patches where they fork keeps typing one
        # message per local activity, as it did when it started.
        return self._patches is not None and self._patches[PATCH_BACKLOG_IN_BATCHES]

    async def _end_batch_if_due(self, reg: Registration, *, typed: int = 1) -> None:
        if not self._s.waiting:
            self._batch_ms = 0  # the loop now waits, which ends the workflow task anyway
            return
        self._batch_ms += (reg.submit_delay_ms + DELIVERY_COST_MS) * typed
        if self._batch_ms >= BATCH_BUDGET_MS:
            self._batch_ms = 0
            await self._write_projection()
            await workflow.sleep(timedelta(milliseconds=1), summary="let new signals in")

    def _delivery_records(self, batch: list[Event]) -> bool:
        """Whether the delivery of `batch` writes it to the projection itself: when it is all
        that waits and nothing else is to be written (messages that come one at a time, or the
        end of a backlog), so typing it takes one local activity instead of two."""
        return (
            batch[0].type != "interrupt"
            and len(self._s.waiting) == len(batch)
            and not self._unsettled
            and self._s.status == "online"
            and self._patched(PATCH_DELIVERY_RECORDS)
        )

    def _stale_projection(self) -> bool:
        return self._published != (self._s.status, len(self._s.waiting))

    def _deliverable(self) -> bool:
        return bool(self._s.waiting) and self._s.registration is not None

    def _continue_as_new_suggested(self) -> bool:
        return workflow.info().is_continue_as_new_suggested()

    async def _continue_as_new(self, *, task_queue: str | None = None) -> None:
        self._continuing = True
        if self._patched(PATCH_TEXTS_OUT_OF_STATE):
            await self._hand_over_waiting_texts()
        await self._write_projection()
        # Let waiting updates answer "moved" before this run ends.
        await workflow.wait_condition(workflow.all_handlers_finished)
        self._s.seen_ids = self._s.seen_ids[-SEEN_IDS_KEPT:]
        self._s.patches_first = True  # the next run checks every patch first
        workflow.continue_as_new(
            AgentInput(agent_id=self._s.agent_id, state=self._s), task_queue=task_queue
        )

    async def _hand_over_waiting_texts(self) -> None:
        """Give the next run the waiting texts this run holds: in its state when they are few
        and short, otherwise written to the projection, where the next run reads them."""
        held = [self._texts[w.id] for w in self._s.waiting if w.id in self._texts]
        if (
            len(held) <= INLINE_WAITING
            and sum(len(e.text) for e in held) <= INLINE_TEXT_CHARS
            and self._patched(PATCH_SMALL_TEXTS_IN_STATE)
        ):
            for entry in self._s.waiting:
                entry.event = self._texts.get(entry.id)
            return
        for chunk in _chunks(held):
            await workflow.execute_local_activity(
                "record_projection",
                ProjectionUpdate(waiting=chunk),
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=PROJECTION_RETRY,
                summary=f"keep {len(chunk)} waiting texts",
            )

    async def _deliver(
        self, event: Event, reg: Registration, *, record: bool = False
    ) -> DeliveryOutcome | None:
        pane = PaneTarget(target=reg.target, socket=reg.socket)
        if event.type == "interrupt":
            await workflow.execute_local_activity(
                "interrupt_pane",
                InterruptRequest(
                    pane=pane,
                    event_id=event.id,
                    key=reg.interrupt_key,
                    event=event,
                    registration=reg,
                ),
                result_type=bool,
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=DELIVERY_RETRY,
                summary=f"press {reg.interrupt_key} in {reg.target}",
            )
            return None
        # The outcome says whether an earlier attempt had typed it already; the pane's record of
        # recent events makes either case a delivery.
        return await workflow.execute_local_activity(
            "deliver_to_pane",
            _deliver_request(
                event, reg, settled=self._settled(event, "delivered") if record else None
            ),
            result_type=DeliveryOutcome,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=DELIVERY_RETRY,
            summary=f"type {event.id} into {reg.target}",
        )

    async def _deliver_batch(
        self, events: list[Event], reg: Registration, *, record: bool = False
    ) -> list[DeliveryOutcome]:
        """Type the messages in order in one local activity; the outcomes of the first of them."""
        requests = [
            _deliver_request(
                event, reg, settled=self._settled(event, "delivered") if record else None
            )
            for event in events
        ]
        return await workflow.execute_local_activity(
            "deliver_batch_to_pane",
            DeliverBatch(requests=requests),
            result_type=list[DeliveryOutcome],
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=DELIVERY_RETRY,
            summary=f"type {len(events)} messages ({events[0].id} …) into {reg.target}",
        )

    async def _typed_receipt(self, event: Event, note: str | None) -> None:
        """Ask the chat's outbox to show the human their message was typed (and what typing cut)."""
        payload = event.payload
        item = receipt_item(
            event.id,
            provider=str(payload["provider"]),
            chat_id=str(payload["chat_id"]),
            message_id=str(payload["message_id"]),
            stage="typed",
            note=note,
        )
        try:
            await workflow.execute_local_activity(
                "queue_receipt",
                QueueReceipt(agent_id=self._s.agent_id, channel_id=event.channel_id, item=item),
                start_to_close_timeout=timedelta(seconds=10),
                # A late receipt is worth little: it must not hold the next message back long.
                schedule_to_close_timeout=RECEIPT_QUEUE_GIVE_UP,
                retry_policy=PROJECTION_RETRY,
                summary=f"receipt (typed) for {event.id}",
            )
        except ActivityError as exc:
            workflow.logger.warning("typed receipt for %s not queued: %s", event.id, exc.cause)

    async def _settle(
        self,
        event: Event,
        status: Literal["delivered", "failed", "rejected"],
        *,
        error: str | None = None,
        note: str | None = None,
        recorded: bool = False,
    ) -> None:
        """Take the event out of the queue and remember what became of it; `recorded` when its
        delivery wrote it to the projection already."""
        # By id, not position: an interrupt may have been queued ahead of it meanwhile.
        waiting = self._s.waiting
        if waiting and waiting[0].id == event.id:
            waiting.pop(0)
        else:
            self._s.waiting = [w for w in waiting if w.id != event.id]
        self._texts.pop(event.id, None)
        _keep_recent(self._s.outcomes, event.id, status)
        if note is not None:
            _keep_recent(self._s.notes, event.id, note)
        elif status == "rejected" and error is not None:
            _keep_recent(self._s.notes, event.id, error)  # what a waiting `send --wait` shows
        if status == "delivered":
            self._s.last_delivered_event_id = event.id
            self._s.delivered_count += 1
            status_changed = self._s.status != "online"
            self._s.status = "online"
            self._s.unreachable_since = None
            self._s.last_error = None
        elif status == "failed":
            self._s.last_error = error
            status_changed = False
        else:
            status_changed = False  # a refused forgery says nothing about the agent's pane
        if not recorded:
            self._unsettled.append(self._settled(event, status, error=error, note=note))
        self._s.tries.pop(event.id, None)
        # The agent row is written when what it shows changes (status, error, the count that
        # waits once the queue drains); the settled events go in the same write, or alone.
        drained = not self._s.waiting
        if (
            status_changed
            or status != "delivered"
            or (drained and (self._stale_projection() or not self._patched(PATCH_ROW_ON_CHANGE)))
        ):
            await self._publish()
        elif drained:
            await self._write_projection()

    def _settled(
        self,
        event: Event,
        status: Literal["delivered", "failed", "rejected"],
        *,
        error: str | None = None,
        note: str | None = None,
    ) -> Event:
        """The event as the projection shows it once settled."""
        return event.model_copy(
            update={
                "status": status,
                "attempts": event.attempts + 1,
                "delivered_at": workflow.now() if status == "delivered" else None,
                "error": error,
                "note": note,
                "tries": self._s.tries.get(event.id, []),
            }
        )

    def _record_try(self, event_id: str, error: str) -> None:
        tries = self._s.tries.setdefault(event_id, [])
        tries.append(Try(at=workflow.now(), error=error))
        del tries[:-TRIES_KEPT]

    async def _mark_unreachable(self, error: str) -> None:
        changed = self._s.last_error != error or self._published != (
            "unreachable",
            len(self._s.waiting),
        )
        if self._s.unreachable_since is None:
            self._s.unreachable_since = workflow.now()
        self._s.status = "unreachable"
        self._s.last_error = error
        if changed:
            await self._publish()

    async def _publish(self) -> None:
        """Show the agent's state in the Temporal UI and write it (and settled events) to the
        projection."""
        s, reg = self._s, self._s.registration
        self._published = (s.status, len(s.waiting))
        where = reg.target if reg else "no pane"
        details = f"{s.status}: {len(s.waiting)} pending, pane {where}"
        if s.status == "unreachable" and s.unreachable_since:
            details += f" missing since {s.unreachable_since.isoformat(timespec='seconds')}"
        if s.last_error:
            details += f"\nlast error: {s.last_error}"
        workflow.set_current_details(details)
        if s.status != self._indexed_status or not self._patched(PATCH_INDEX_ON_CHANGE):
            workflow.upsert_search_attributes(
                [AGENT_ID.value_set(s.agent_id), AGENT_STATUS.value_set(s.status)]
            )
            self._indexed_status = s.status
        await self._write_projection(
            Agent(
                id=s.agent_id,
                target=reg.target if reg else None,
                tmux_socket=reg.socket if reg else None,
                host=reg.host if reg else None,
                interrupt_key=reg.interrupt_key if reg else "C-c",
                submit_delay_ms=reg.submit_delay_ms if reg else 150,
                status=s.status,
                pending=len(s.waiting),
                last_delivered_event_id=s.last_delivered_event_id,
                last_error=s.last_error,
                updated_at=workflow.now(),
            )
        )

    async def _write_projection(self, agent: Agent | None = None) -> None:
        """Write the settled events (and the agent row, when given), in chunks of bounded size:
        usually one local activity per batch instead of one per message."""
        if not self._unsettled and agent is None:
            return
        events, self._unsettled = self._unsettled, []
        chunks = list(_chunks(events)) or [[]]
        for i, chunk in enumerate(chunks):
            row = agent if i == len(chunks) - 1 else None
            what = [f"{len(chunk)} events"] if chunk else []
            if row is not None:
                what.append(f"agent {row.status}")
            await workflow.execute_local_activity(
                "record_projection",
                ProjectionUpdate(events=chunk, agent=row),
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=PROJECTION_RETRY,
                summary="record " + ", ".join(what),
            )

    # ---- de-duplication memory -------------------------------------------------------------------

    def _remember(self, event_id: str) -> None:
        self._seen.add(event_id)
        self._s.seen_ids.append(event_id)
        if len(self._s.seen_ids) > SEEN_IDS_KEPT * 2:
            # Trim in batches so the list stays cheap to maintain.
            drop = self._s.seen_ids[: len(self._s.seen_ids) - SEEN_IDS_KEPT]
            self._s.seen_ids = self._s.seen_ids[-SEEN_IDS_KEPT:]
            self._seen.difference_update(drop)


def _deliver_request(
    event: Event, reg: Registration, *, settled: Event | None = None
) -> DeliverRequest:
    """What the pane's host needs to type `event`, and to check it is the deployment's."""
    return DeliverRequest(
        pane=PaneTarget(target=reg.target, socket=reg.socket),
        event_id=event.id,
        text=pane_text(event),
        submit_delay_ms=reg.submit_delay_ms,
        max_chars=reg.max_chars,
        event=event,
        registration=reg,
        settled=settled,
    )


def _from_chat(event: Event) -> bool:
    """A human's message from a chat provider: it names the provider's message to answer."""
    payload = event.payload
    return (
        event.type == "human_message"
        and bool(payload.get("message_id"))
        and bool(payload.get("chat_id"))
        and bool(payload.get("provider"))
    )


def _keep_recent(memory: dict[str, str], event_id: str, value: str) -> None:
    """Remember `value` for `event_id`, forgetting the oldest past OUTCOMES_KEPT."""
    memory[event_id] = value
    while len(memory) > OUTCOMES_KEPT:
        memory.pop(next(iter(memory)))


def _chunks(events: list[Event]) -> list[list[Event]]:
    """Split events into runs whose texts add up to about CHUNK_CHARS (one event at least)."""
    chunks: list[list[Event]] = []
    size = 0
    for event in events:
        cost = len(event.text) + 500  # the rest of the row, roughly
        if not chunks or size + cost > CHUNK_CHARS:
            chunks.append([])
            size = 0
        chunks[-1].append(event)
        size += cost
    return chunks
