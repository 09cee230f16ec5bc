"""`trace`: one message's life, oldest first, and why it waits if it does.

The projection says what was settled (status, attempts, error, times); the workflow that holds
the message says what only it knows (its place in the queue, tries so far, the pane it is
trying); Temporal says whether a worker polls the workflow's queue and whether its tasks fail.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from agentcomms.config import Config
from agentcomms.errors import TraceNotFound
from agentcomms.models import LOCAL_CHANNEL, Agent, Event, Try
from agentcomms.store import Store
from agentcomms.temporal import last_polls, poll_silence_s, ui_url
from agentcomms.workflow_ids import (
    escalation_workflow_id,
    host_of_task_queue,
    mailbox_id,
    outbox_workflow_id,
)
from gateway.agents.turns import is_turn, traced_turn, turn_steps
from gateway.approvals.trace import is_approval_id, rung_step, trace_approval
from workflows.escalation.workflow import EscalationWorkflow
from workflows.mailbox.client import Mailbox
from workflows.mailbox.models import AgentSnapshot, QueuedEvent
from workflows.mailbox.workflow import AgentWorkflow
from workflows.outbox.workflow import OutboxWorkflow

# A query needs a worker on the workflow's queue; without one it would wait for the RPC deadline.
QUERY_TIMEOUT = timedelta(seconds=3)


def _at(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def _step(when: datetime | None, what: str, detail: str) -> dict[str, Any]:
    return {"at": _at(when), "step": what, "detail": detail}


def _try_steps(tries: list[Try], failed: int) -> list[dict[str, Any]]:
    """A step for each failed attempt kept (the latest `len(tries)` of `failed`), oldest first."""
    first = max(failed - len(tries), 0) + 1
    steps = []
    if first > 1:
        steps.append(
            _step(None, "tries", f"tries 1 to {first - 1} failed (their errors are not kept)")
        )
    steps += [
        _step(t.at, "try", f"try {n} failed: {t.error}") for n, t in enumerate(tries, start=first)
    ]
    return steps


def _sender(event: Event) -> str:
    p = event.payload
    if event.channel_id.startswith("agent:"):
        return f"agent {event.source_agent_id or event.channel_id.removeprefix('agent:')}"
    if p.get("source") == "cli":
        return "`agentcomms send`" if event.type != "interrupt" else "`agentcomms interrupt`"
    if p.get("sender_name") or p.get("sender_id"):
        name = p.get("sender_name") or ""
        ident = p.get("sender_id") or ""
        return f"{name} ({ident})" if name and ident else str(name or ident)
    return "unknown sender"


class Tracer:
    def __init__(self, cfg: Config, store: Store, mailbox: Mailbox, host: str) -> None:
        self._cfg = cfg
        self._store = store
        self._mailbox = mailbox
        self._client: Client = mailbox.client
        self._host = host

    async def trace(self, event_id: str) -> dict[str, Any]:
        if is_approval_id(event_id):
            traced = await trace_approval(self._client, self._cfg, event_id)
            if traced is not None:
                return traced
        event = await self._store.get_event(event_id)
        if event is None:
            raise TraceNotFound(
                f"no event {event_id!r}; `agentcomms events AGENT` lists an agent's event ids"
            )
        if is_turn(event):
            out = self._summary(event, mailbox_id(event.agent_id))
            out["steps"] = await traced_turn(self._store, event)
            return out
        if event.direction == "out":
            traced = await self._trace_outbound(event)
            if event.payload.get("urgent"):
                # Marked urgent: its agent's ladder, rung by rung (gateway/messages/urgent.py).
                handle = self._client.get_workflow_handle_for(
                    EscalationWorkflow.run, escalation_workflow_id(event.agent_id)
                )
                try:
                    rungs = await handle.query(EscalationWorkflow.rungs, rpc_timeout=QUERY_TIMEOUT)
                except RPCError:
                    rungs = []
                traced["steps"] += [rung_step(rung) for rung in rungs]
            return traced
        return await self._trace_inbound(event)

    def _summary(self, event: Event, wf_id: str | None) -> dict[str, Any]:
        return {
            "event_id": event.id,
            "agent_id": event.agent_id,
            "type": event.type,
            "direction": event.direction,
            "channel_id": event.channel_id,
            "sender": _sender(event) if event.direction == "in" else event.source_agent_id,
            "status": event.status,
            "attempts": event.attempts,
            "error": event.error,
            "note": event.note,
            "created_at": _at(event.created_at),
            "delivered_at": _at(event.delivered_at),
            "workflow_id": wf_id,
            "temporal_ui": ui_url(self._cfg.temporal, wf_id) if wf_id else None,
            "waiting": None,
            "why": [],
        }

    # ---- to an agent's pane --------------------------------------------------------------------

    async def _trace_inbound(self, event: Event) -> dict[str, Any]:
        wf_id = mailbox_id(event.agent_id)
        out = self._summary(event, wf_id)
        what = "interrupt" if event.type == "interrupt" else "message"
        steps = [
            _step(
                event.created_at,
                "accepted",
                f"{what} from {event.channel_id}, {_sender(event)}, by "
                + event.payload.get("accepted_by", f"the gateway on {self._host}"),
            )
        ]
        out["steps"] = steps
        agent = await self._store.get_agent(event.agent_id)
        if event.status == "rejected":
            steps.append(_step(event.created_at, "rejected", event.error or "refused"))
            return out
        if event.status in ("delivered", "failed"):
            steps.append(_step(event.created_at, "queued", f"in {wf_id}"))
            # The settled attempt is counted too: all but the last one failed.
            steps += _try_steps(event.tries, event.attempts - 1)
            if event.status == "delivered":
                typed = self._typed_into(agent, event)
                if event.attempts > 1:
                    typed += f", on try {event.attempts}"
                steps.append(_step(event.delivered_at, "typed", typed))
                steps += await self._submitted_steps(event)
                if agent is not None and agent.type == "process":
                    steps += await turn_steps(self._store, event)
            else:
                steps.append(_step(None, "failed", event.error or "failed"))
            return out
        await self._waiting(event, agent, out)
        return out

    async def _submitted_steps(self, event: Event) -> list[dict[str, Any]]:
        """Whether the agent's own prompt carried the typed message (where its hooks report)."""
        if event.type == "interrupt":
            return []
        handle = self._client.get_workflow_handle(mailbox_id(event.agent_id))
        try:
            async with asyncio.timeout(QUERY_TIMEOUT.total_seconds() + 1):
                snapshot = await handle.query(AgentWorkflow.state, rpc_timeout=QUERY_TIMEOUT)
        except (RPCError, TimeoutError):
            return []
        r = snapshot.readiness
        if event.id in r.submitted:
            return [_step(None, "submitted", "the agent's UserPromptSubmit carried it")]
        if event.id in r.awaiting:
            return [_step(None, "not submitted", "no UserPromptSubmit has carried it yet")]
        return []

    @staticmethod
    def _typed_into(agent: Agent | None, event: Event) -> str:
        where = f"into pane {agent.target} on host {agent.host}" if agent and agent.target else ""
        if agent is not None and agent.type == "process":
            where = f"prompted to process agent {agent.id} on host {agent.host} ({agent.target})"
        note = f" ({event.note})" if event.note else ""
        return (where or "into its pane") + note

    async def _waiting(self, event: Event, agent: Agent | None, out: dict[str, Any]) -> None:
        """Ask Temporal and the workflow where a waiting message stands, and why."""
        wf_id = out["workflow_id"]
        steps: list[dict[str, Any]] = out["steps"]
        why: list[str] = out["why"]
        handle = self._client.get_workflow_handle(wf_id)
        try:
            description = await handle.describe()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            steps.append(_step(event.created_at, "queued", f"in {wf_id}"))
            why.append(
                f"its mailbox workflow {wf_id} does not exist in namespace "
                f"{self._cfg.temporal.namespace} (was Temporal's database replaced?)"
            )
            return
        if description.status != WorkflowExecutionStatus.RUNNING:
            status = description.status.name if description.status else "unknown"
            steps.append(_step(event.created_at, "queued", f"in {wf_id}"))
            why.append(f"its mailbox workflow {wf_id} is {status.lower()}, not running")
            return
        queue = description.task_queue
        broken = (await self._mailbox.broken()).get(event.agent_id)
        polls = await last_polls(self._client, queue)
        silence_s = poll_silence_s(self._cfg.temporal)
        live = {who: age for who, age in polls.items() if age <= silence_s}
        snapshot, queued = await self._ask(handle, event.id) if not broken else (None, None)
        if isinstance(queued, QueuedEvent):
            out["waiting"] = queued.model_dump()
            steps.append(
                _step(
                    event.created_at,
                    "queued",
                    f"in {wf_id}, position {queued.position} of {queued.waiting}",
                )
            )
        else:
            steps.append(_step(event.created_at, "queued", f"in {wf_id}"))
        host = host_of_task_queue(queue)
        if broken:
            why.append(f"the mailbox is broken: {broken}")
        if not live:
            seen = (
                f"last poll {min(polls.values()):.0f} s ago" if polls else "no worker ever polled"
            )
            why.append(
                f"host {host} has no worker polling {queue} ({seen}): start `agentcomms worker` "
                "(or `agentcomms up`) there"
            )
        elif snapshot is None and not broken:
            last = f"last poll {min(live.values()):.0f} s ago"
            why.append(
                f"no worker answered for host {host} ({queue}) within "
                f"{QUERY_TIMEOUT.total_seconds():.0f} s ({last}): it stopped or is stuck; "
                "start `agentcomms worker` (or `agentcomms up`) there"
            )
            if agent is not None and agent.status == "unreachable":
                why.append(
                    f"its pane {agent.target} on host {agent.host} was missing when last tried "
                    f"({agent.last_error})"
                )
        if isinstance(snapshot, AgentSnapshot):
            self._why_from_snapshot(event, snapshot, queued, steps, why)
        max_count, _ = self._cfg.mailbox_limits(event.agent_id)
        count = (
            queued.waiting if isinstance(queued, QueuedEvent) else (agent.pending if agent else 0)
        )
        if count >= max_count:
            why.append(
                f"the mailbox is full ({count:,} wait, limit {max_count:,}): new messages are "
                "refused until these are typed"
            )
        if not why and isinstance(queued, QueuedEvent):
            why.append(
                "it is being typed now"
                if queued.position == 1
                else f"{queued.position - 1} messages are typed before it"
            )

    def _why_from_snapshot(
        self,
        event: Event,
        snapshot: AgentSnapshot,
        queued: QueuedEvent | None,
        steps: list[dict[str, Any]],
        why: list[str],
    ) -> None:
        if snapshot.refused_reports:
            why.append(
                f"{snapshot.refused_reports} hook report(s) for {event.agent_id} not signed by "
                f"this deployment were ignored (the last: {snapshot.last_refused_report}): "
                "someone who reaches Temporal signalled them; the agent's state is what its own "
                "hooks said through the gateway"
            )
        reg = snapshot.registration
        if reg is None:
            why.append(
                f"no pane is registered for {event.agent_id}: `agentcomms agents register "
                f"{event.agent_id} --tmux SESSION:WINDOW.PANE`"
            )
            return
        if queued is not None:
            steps += _try_steps(queued.tries, queued.attempts)
        if snapshot.status == "unreachable":
            since = snapshot.unreachable_since
            when = f" since {since.isoformat(timespec='seconds')}" if since else ""
            if reg.type == "process":
                why.append(
                    f"process agent {event.agent_id} is not running on host {reg.host}{when} "
                    f"({snapshot.last_error}); it is started again with backoff, and prompted "
                    "as soon as it runs"
                )
            else:
                why.append(
                    f"pane {reg.target} on host {reg.host} is missing{when} "
                    f"({snapshot.last_error}); it is tried again with backoff, and typed as soon "
                    "as the pane exists"
                )
        r = snapshot.readiness
        at = f" since {r.since.strftime('%H:%M:%S')}" if r.since else ""
        if r.state in ("busy", "waiting", "offline") and reg.deliver == "when-ready":
            why.append(
                f"waits because {event.agent_id} is {r.describe()}{at}: it is typed once the "
                "agent is at its prompt"
            )
        elif r.pane:
            why.append(f"waits because its pane is not ready: {r.pane}")
        if r.state == "unknown" and r.hooks_missing:
            why.append(
                f"{event.agent_id}'s hooks are missing: a message typed there left its input box "
                "and no UserPromptSubmit carried it (`agentcomms install claude-code`, then "
                "restart the agent); the pane's look alone decides"
            )
        elif r.state == "unknown":
            why.append(
                f"{event.agent_id}'s state is unknown: no hook has reported (hooks missing? "
                "`agentcomms install claude-code`); the pane's look alone decides"
            )

    async def _ask(self, handle: WorkflowHandle[Any, Any], event_id: str) -> tuple[Any, Any]:
        """The workflow's snapshot and the event's place in the queue; (None, None) when no
        worker answers in time."""
        try:
            async with asyncio.timeout(QUERY_TIMEOUT.total_seconds() + 1):
                snapshot = await handle.query(AgentWorkflow.state, rpc_timeout=QUERY_TIMEOUT)
                queued = await handle.query(
                    AgentWorkflow.queued, event_id, rpc_timeout=QUERY_TIMEOUT
                )
        except (RPCError, TimeoutError):
            return None, None
        return snapshot, queued

    # ---- from an agent to a human ----------------------------------------------------------------

    async def _trace_outbound(self, event: Event) -> dict[str, Any]:
        provider = event.payload.get("provider") or event.channel_id.partition(":")[0]
        if event.channel_id == LOCAL_CHANNEL:
            out = self._summary(event, None)
            out["steps"] = [
                _step(event.created_at, "accepted", f"from agent {event.agent_id} to your inbox"),
                _step(event.delivered_at, "delivered", "in the inbox: `agentcomms inbox`"),
            ]
            return out
        wf_id = outbox_workflow_id(event.agent_id, event.channel_id)
        out = self._summary(event, wf_id)
        steps = [
            _step(
                event.created_at,
                "accepted",
                f"from agent {event.agent_id} to {event.channel_id}, by the gateway on {self._host}",
            ),
            _step(event.created_at, "queued", f"in {wf_id}, sent in order"),
        ]
        out["steps"] = steps
        # The send's activity recorded each failed try with the provider's answer; `attempts`
        # counts them too (the store keeps the most any writer saw), or the try that got through.
        tries = event.tries
        if event.status == "delivered":
            steps += _try_steps(tries, max(event.attempts - 1, len(tries)))
            sent_as = event.payload.get("message_id")
            detail = f"{provider} took it" + (f" as message {sent_as}" if sent_as else "")
            if event.attempts > 1:
                detail += f" (try {event.attempts})"
            steps.append(_step(event.delivered_at, "sent", detail))
            return out
        if event.status == "failed":
            # The try that failed last is the failure itself: one step, with its time.
            last = tries[-1] if tries and tries[-1].error == event.error else None
            before = tries[:-1] if last else tries
            steps += _try_steps(before, max(event.attempts - 1, len(before)))
            detail = f"{provider} answered: {event.error}"
            if event.attempts > 1:
                detail += f" (try {event.attempts})"
            steps.append(_step(last.at if last else None, "failed", detail))
            return out
        steps += _try_steps(tries, max(event.attempts, len(tries)))
        await self._outbox_attempts(out, provider)
        return out

    async def _outbox_attempts(self, out: dict[str, Any], provider: str) -> None:
        handle = self._client.get_workflow_handle(out["workflow_id"])
        try:
            description = await handle.describe()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            out["why"].append(f"its outbox workflow {out['workflow_id']} does not exist")
            return
        for activity in description.raw_description.pending_activities:
            failure = activity.last_failure.message if activity.HasField("last_failure") else ""
            tried = (
                activity.last_started_time.ToJsonString()
                if activity.HasField("last_started_time")
                else None
            )
            # `attempt` is the try under way, or the next one while Temporal backs off.
            detail = f"{activity.attempt - 1} failed so far"
            if failure:
                detail += f"; {provider} last answered: {failure}"
            if activity.HasField("next_attempt_schedule_time"):
                next_at = activity.next_attempt_schedule_time.ToJsonString()
                detail += f"; try {activity.attempt} at {next_at}"
            elif activity.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
                detail += f"; try {activity.attempt} is under way"
            else:
                detail += f"; try {activity.attempt} waits for a worker to take it"
            out["steps"].append({"at": tried, "step": "send attempts", "detail": detail})
        polls = await last_polls(self._client, description.task_queue)
        if not any(age <= poll_silence_s(self._cfg.temporal) for age in polls.values()):
            out["why"].append(
                f"no worker polls the shared queue {description.task_queue}: start "
                "`agentcomms worker` (or `agentcomms up`)"
            )
        try:
            waiting = await handle.query(OutboxWorkflow.pending, rpc_timeout=QUERY_TIMEOUT)
        except RPCError:
            return
        out["waiting"] = {"waiting": waiting}
        if not out["why"]:
            out["why"].append(f"{waiting} sends wait in this outbox, in order")
