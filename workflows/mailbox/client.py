"""How everyone else reaches a mailbox: post events, register panes, ask, wait for delivery.

The gateway and the workers use this one client; the mailbox's workflow id is spelled in
:mod:`agentcomms.workflow_ids`, and its signals, queries and updates are called by reference.

A message is durable once ``post`` returns: Temporal has accepted the signal (signal-with-start, so
an agent that has no workflow yet gets one and the message waits there for it). Before that, the
agent's limits are checked against what already waits for it (the projection counts it): past a
limit ``post`` raises ``MailboxFull`` and nothing is queued.

Every event and registration leaves here signed with the deployment key: the pane's host types
nothing it cannot verify (:mod:`agentcomms.trust`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from agentcomms import metrics
from agentcomms.agents.state import HookReport
from agentcomms.config import host_name
from agentcomms.errors import MailboxFull
from agentcomms.models import Event, Registration, Unregister
from agentcomms.store import PROJECTION_UNAVAILABLE, Store
from agentcomms.trust import DeploymentKey
from agentcomms.workflow_ids import MAILBOX_WORKFLOW, agent_of_mailbox, mailbox_id
from workflows.mailbox.models import AgentInput, AgentSnapshot, DeliveryStatus, WaitForDelivery
from workflows.mailbox.workflow import AgentWorkflow
from workflows.updates import wait_update

log = logging.getLogger(__name__)


class Arrivals:
    """Wakes those waiting for an agent's messages when one is posted through this process."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}

    def event(self, agent_id: str) -> asyncio.Event:
        return self._events.setdefault(agent_id, asyncio.Event())

    def notify(self, agent_id: str) -> None:
        if (event := self._events.get(agent_id)) is not None:
            event.set()


def mailbox_handle(client: Client, agent_id: str) -> WorkflowHandle[AgentWorkflow, None]:
    """The agent's mailbox, to signal, query or describe (its latest run)."""
    return client.get_workflow_handle_for(AgentWorkflow.run, mailbox_id(agent_id))


Limits = Callable[[str], tuple[int, int]]  # agent id -> (messages, bytes) that may wait


def _no_limits(_: str) -> tuple[int, int]:
    return (10_000, 10**9)


async def broken_mailboxes(client: Client) -> dict[str, str]:
    """Agents whose mailbox workflow keeps failing its tasks, with what Temporal reports:
    their messages are safe in the history but nothing is typed until it is fixed."""
    found: dict[str, str] = {}
    query = (
        f'WorkflowType = "{MAILBOX_WORKFLOW}" AND ExecutionStatus = "Running" '
        "AND TemporalReportedProblems IS NOT NULL"
    )
    async for wf in client.list_workflows(query, limit=1000):
        problems = wf.search_attributes.get("TemporalReportedProblems") or []
        causes = [str(p).partition("=")[2] for p in problems if str(p).startswith("cause=")]
        agent_id = agent_of_mailbox(wf.id) or wf.id
        found[agent_id] = (
            f"its workflow's tasks keep failing ({', '.join(causes) or 'see its history'}); "
            f"messages are kept but not typed: `temporal workflow describe -w {wf.id}`"
        )
    return found


class Mailbox:
    def __init__(
        self,
        client: Client,
        store: Store,
        *,
        task_queue: str,
        key: DeploymentKey,
        limits: Limits = _no_limits,
        accepted_by: str = "",
        observers: Sequence[Callable[[Event], Awaitable[None]]] = (),
        registering: Sequence[Callable[[str, Registration], None]] = (),
    ) -> None:
        self._client = client
        self._key = key
        # Which process made a message durable, for `trace` (the gateway, or a worker posting a
        # call's answer).
        self._accepted_by = accepted_by or f"process {os.getpid()} on {host_name()}"
        self._store = store
        self._limits = limits
        # Per agent, an upper bound on what waits: the last count plus everything posted since
        # (deliveries only lower it). Every post goes through the deployment's one gateway, so
        # the projection is counted again only when the bound nears a limit, not on every send.
        self._bounds: dict[str, tuple[int, int]] = {}
        self.arrivals = Arrivals()
        # Who hears each message once it is durable (an urgent message's ladder stops at the
        # human's next one); each must be quick and never raise.
        self.observers: list[Callable[[Event], Awaitable[None]]] = list(observers)
        # Who hears of each registration as it is accepted, before the mailbox runs it (the
        # socket's guard: a process in a pane registered a moment ago is already an agent's).
        self.registering: list[Callable[[str, Registration], None]] = list(registering)
        # A mailbox starts on the shared queue, which any worker polls (the gateway's machine
        # may run none); registration moves it to its pane's host, where it types.
        self._task_queue = task_queue

    @property
    def client(self) -> Client:
        return self._client

    async def _signal(self, agent_id: str, signal: Callable[..., Any], arg: object) -> None:
        # Most mailboxes are running: a plain signal costs the server (and this process) less
        # than a signal-with-start. One that is not running yet is started by the second call.
        try:
            await mailbox_handle(self._client, agent_id).signal(signal, arg)
            return
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        await self._client.start_workflow(
            AgentWorkflow.run,
            AgentInput(agent_id=agent_id, task_queue=self._task_queue),
            id=mailbox_id(agent_id),
            task_queue=self._task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            # Signal-with-start names its signal by string; the name is read off the handler.
            start_signal=workflow._SignalDefinition.must_name_from_fn_or_str(signal),
            start_signal_args=[arg],
            static_summary=f"mailbox of agent {agent_id}",
        )

    async def post(self, event: Event) -> str:
        """Make the event durable in the agent's mailbox, then queue its row in the projection
        (written behind; this process reads it once written).

        Raises ``MailboxFull`` (nothing queued) when a message would pass the agent's limits;
        an interrupt is never refused.
        """
        if event.direction == "in" and event.type != "interrupt":
            await self._check_room(event)
        event = event.model_copy(
            update={"payload": {**event.payload, "accepted_by": self._accepted_by}}
        )
        # Signed last: the tag covers the payload exactly as the mailbox will hold it.
        event = self._key.sign_event(event)
        await self._signal(event.agent_id, AgentWorkflow.enqueue, event)
        metrics.accepted(event)
        for observer in self.observers:
            await observer(event)
        # After the signal: the projection never shows a message Temporal does not hold. The
        # message is durable now, so the sender is answered without waiting for its row (under
        # load, awaiting the insert was about a tenth of a send's time); this process's reads of
        # events wait for it. A failing projection must not make it look lost (a client would
        # retry and send it twice): the mailbox writes the row again when it settles.
        self._store.queue_event(event).add_done_callback(
            functools.partial(self._row_written, event)
        )
        return event.id

    def _row_written(self, event: Event, written: asyncio.Future[bool]) -> None:
        if written.cancelled():
            return
        exc = written.exception()
        if exc is None:
            self.arrivals.notify(event.agent_id)  # the row is there for them to read
            return
        log.log(
            logging.WARNING if isinstance(exc, PROJECTION_UNAVAILABLE) else logging.ERROR,
            "%s accepted; its projection row waits for delivery: %s",
            event.id,
            exc,
            extra={"event_id": event.id, "agent_id": event.agent_id},
        )

    async def _check_room(self, event: Event) -> None:
        max_count, max_bytes = self._limits(event.agent_id)
        this = len(event.text.encode("utf-8", "replace"))
        bound = self._bounds.get(event.agent_id)
        if bound is not None and bound[0] < max_count // 2 and bound[1] + this <= max_bytes // 2:
            self._bounds[event.agent_id] = (bound[0] + 1, bound[1] + this)
            return
        try:
            count, size = await self._store.waiting_for(event.agent_id)
        except PROJECTION_UNAVAILABLE as exc:
            # The mailbox itself stops at a hard cap; a projection hiccup must not refuse sends.
            log.warning(
                "could not count what waits for %s, accepting: %s",
                event.agent_id,
                exc,
                extra={"event_id": event.id, "agent_id": event.agent_id},
            )
            return
        if count + 1 <= max_count and size + this <= max_bytes:
            self._bounds[event.agent_id] = (count + 1, size + this)
            return
        limit = (
            f"its limit is {max_count:,} messages"
            if count + 1 > max_count
            else f"its limit is {max_bytes:,} bytes and this message has {this:,}"
        )
        metrics.refused("mailbox_full")
        raise MailboxFull(
            f"{event.agent_id}'s mailbox is full: {count:,} messages ({size:,} bytes) wait to be "
            f"typed and {limit}. Nothing was queued. They are typed once its pane can take them "
            "(`agentcomms agents` says why it cannot); send again then, or raise "
            f"mailbox.max_pending / max_pending_bytes in the config."
        )

    async def register(self, agent_id: str, registration: Registration) -> None:
        for heard in self.registering:
            heard(agent_id, registration)
        signed = self._key.sign_registration(agent_id, registration)
        assert signed.registered_at is not None  # drawn as it was signed
        await self._pane_signed(agent_id, signed.registered_at)
        await self._signal(agent_id, AgentWorkflow.register, signed)

    async def _pane_signed(self, agent_id: str, at: datetime) -> None:
        """Record, before the mailbox hears of it, when the agent's newest pane change was made:
        the host types into no pane registered before it, whatever a mailbox's state (forged,
        or a genuine one of an earlier run) says."""
        try:
            await self._store.pane_signed(agent_id, at)
        except PROJECTION_UNAVAILABLE as exc:
            # The mailbox's own newest-only rule still stands; the change must not wait for it.
            log.warning("the projection did not record %s's new pane: %s", agent_id, exc)

    async def report(self, agent_id: str, report: HookReport) -> bool:
        """Tell the agent's mailbox what its hooks said; False when it has no mailbox (a hook
        of an agent never registered starts nothing)."""
        try:
            signed = self._key.sign_report(agent_id, report)
            await mailbox_handle(self._client, agent_id).signal(AgentWorkflow.report, signed)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True

    async def unregister(self, agent_id: str) -> None:
        now = datetime.now(UTC)
        request = Unregister(id=uuid4().hex, requested_at=now)
        await self._pane_signed(agent_id, now)
        await self._signal(
            agent_id, AgentWorkflow.unregister, self._key.sign_unregister(agent_id, request)
        )

    async def broken(self) -> dict[str, str]:
        """Agents whose mailbox workflow keeps failing its tasks, with what Temporal reports."""
        return await broken_mailboxes(self._client)

    async def snapshot(self, agent_id: str) -> AgentSnapshot | None:
        handle = mailbox_handle(self._client, agent_id)
        try:
            return await handle.query(AgentWorkflow.state)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise

    async def wait_delivered(
        self, agent_id: str, event_id: str, timeout_s: float
    ) -> DeliveryStatus:
        """Wait until the event is typed or failed, or the timeout passes (then: still queued)."""
        status: DeliveryStatus | None = await wait_update(
            mailbox_handle(self._client, agent_id),
            AgentWorkflow.wait_for_delivery,
            lambda seconds: WaitForDelivery(event_id=event_id, timeout_s=seconds, submitted=True),
            timeout_s,
            moved=lambda s: s.status == "moved",
        )
        return status or DeliveryStatus(event_id=event_id, status="queued")
