"""An agent's mailbox as the projection showed it, from what Temporal keeps of its runs: the
agent's row, and its messages in, in the order they arrived, with what became of each.

Where each part comes from:
- the texts: the signals of the runs that received them, or the waiting messages a run handed
  over in its input (the continue-as-new state);
- what became of them: the running mailbox's own account (the `account` query: its row, what
  waits, the latest outcomes, what it owes the projection), else the outcomes each run carried
  in, and the results of the deliveries (`deliver_to_pane`) with the time each ended;
- when its newest pane was signed: its registrations and unregisters.

What the deployment did not sign is shown as the mailbox wrote it: a message refused as not
signed. A mailbox holding nothing the deployment signed is not this deployment's, and is left
out (an attacker's workflow makes no agent).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import cast, get_args

from temporalio.client import Client, WorkflowExecution
from temporalio.service import RPCError

from activities.projection import as_mailbox_writes
from agentcomms.agents.state import State
from agentcomms.models import Agent, AgentStatus, DeliveryOutcome, Event, Registration, Unregister
from agentcomms.search_attributes import AGENT_STATE, AGENT_STATUS
from agentcomms.trust import DeploymentKey
from agentcomms.workflow_ids import agent_of_mailbox
from gateway.rebuild.histories import decode, read_run
from workflows.mailbox.models import AgentInput, AgentState, MailboxAccount, Outcome
from workflows.mailbox.projection import agent_row, settled_event
from workflows.mailbox.workflow import AgentWorkflow

log = logging.getLogger(__name__)

# A mailbox's account needs a worker on its queue; one whose host is down is read from its
# histories alone rather than waited for.
ACCOUNT_TIMEOUT = timedelta(seconds=3)
FORGOTTEN = "what became of it is no longer in Temporal's history"
REASON_FORGOTTEN = "it failed; why is no longer in Temporal's history"


@dataclass
class MailboxRows:
    agent: Agent
    events: list[Event] = field(default_factory=list)
    pane_signed: datetime | None = None  # the newest registration or unregister signed
    answered: bool = False  # the running mailbox gave its own account


@dataclass
class MailboxReading:
    """What the runs of one mailbox say, read oldest first."""

    agent_id: str
    key: DeploymentKey
    received: dict[str, Event] = field(default_factory=dict)  # in the order they arrived
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    settled: dict[str, Event] = field(default_factory=dict)  # owed to the projection, whole
    typed: dict[str, tuple[datetime, DeliveryOutcome]] = field(default_factory=dict)
    state: AgentState | None = None  # the newest run's input state
    genuine: bool = False  # something here was signed by the deployment for this agent
    pane_signed: datetime | None = None
    # The newest registration signed (None once a newer unregister was), and the last typed.
    pane: Registration | None = None
    last_typed: str | None = None

    def receive(self, event: Event) -> None:
        self.received.setdefault(event.id, event)
        if event.agent_id == self.agent_id and self.key.event_is_genuine(event):
            self.genuine = True

    def pane_changed(self, at: datetime | None, pane: Registration | None) -> None:
        self.genuine = True
        if at is not None and (self.pane_signed is None or at > self.pane_signed):
            self.pane_signed = at
            self.pane = pane

    def carried_in(self, state: AgentState) -> None:
        self.state = state
        for waiting in state.waiting:
            if waiting.event is not None:
                self.receive(waiting.event)
        self.outcomes.update(state.outcomes)
        self.notes.update(state.notes)
        self.settled.update({e.id: e for e in state.unrecorded})

    def accounted(self, account: MailboxAccount) -> None:
        self.outcomes.update(account.outcomes)
        self.notes.update(account.notes)
        self.settled.update({e.id: e for e in account.unrecorded})


async def rebuild_mailbox(
    client: Client, key: DeploymentKey, runs: list[WorkflowExecution]
) -> MailboxRows | None:
    """The rows of the mailbox whose runs these are (oldest first); None when it is not one of
    this deployment's."""
    agent_id = agent_of_mailbox(runs[-1].id)
    if agent_id is None:
        return None
    reading = MailboxReading(agent_id, key)
    for execution in runs:
        await _read(client, reading, execution)
    if not reading.genuine:
        log.info("left out %s: nothing in it was signed by this deployment", runs[-1].id)
        return None
    account = await _account(client, runs[-1])
    if account is not None:
        reading.accounted(account)
        agent, waiting = account.agent, account.waiting
    else:
        agent, waiting = _from_histories(reading, runs[-1])
    rows = MailboxRows(agent=agent, pane_signed=reading.pane_signed, answered=account is not None)
    waits = set(waiting)
    rows.events = [shown(reading, event, waits) for event in reading.received.values()]
    return rows


def _from_histories(reading: MailboxReading, newest: WorkflowExecution) -> tuple[Agent, list[str]]:
    """The agent's row and what waits, when its mailbox cannot be asked: the newest run's input,
    what the run took and typed since, and what the mailbox last indexed (its status and state,
    search attributes it keeps current). Its last error and what its agent waits for are not
    kept there: they come back when the mailbox next writes its row."""
    state = reading.state or AgentState(agent_id=reading.agent_id)
    waiting = [w.id for w in state.waiting]
    known = set(reading.outcomes) | set(reading.typed) | set(reading.settled)
    waiting += [i for i in reading.received if i not in known and i not in waiting]
    waiting = [i for i in waiting if i not in known]
    state = state.model_copy(deep=True)
    if reading.pane_signed is not None and (
        state.pane_changed_at is None or reading.pane_signed > state.pane_changed_at
    ):
        state.registration, state.pane_changed_at = reading.pane, reading.pane_signed
    state.last_delivered_event_id = reading.last_typed or state.last_delivered_event_id
    indexed = newest.typed_search_attributes
    if (status := indexed.get(AGENT_STATUS)) in get_args(AgentStatus):
        state.status = cast(AgentStatus, status)
    if (doing := indexed.get(AGENT_STATE)) in get_args(State):
        state.readiness.state = cast(State, doing)
    return agent_row(state, len(waiting), newest.start_time), waiting


async def _read(client: Client, reading: MailboxReading, execution: WorkflowExecution) -> None:
    run = await read_run(client, execution)
    started = await decode(client, run.input, AgentInput)
    if started is not None and started.state is not None:
        reading.carried_in(started.state)
    for signal in run.signals:
        if signal.name == "enqueue":
            if (event := await decode(client, signal.payloads, Event)) is not None:
                reading.receive(event)
        elif signal.name == "register":
            reg = await decode(client, signal.payloads, Registration)
            if reg is not None and reading.key.registration_is_genuine(reading.agent_id, reg):
                reading.pane_changed(reg.registered_at, reg)
        elif signal.name == "unregister":
            off = await decode(client, signal.payloads, Unregister)
            if off is not None and reading.key.unregister_is_genuine(reading.agent_id, off):
                reading.pane_changed(off.requested_at, None)
    for typing in run.local("deliver_to_pane"):
        outcomes = await decode(client, typing.result, list[DeliveryOutcome]) or []
        for outcome in outcomes:
            reading.typed[outcome.event_id] = (typing.at, outcome)
            if outcome.rejected is None:
                reading.last_typed = outcome.event_id


async def _account(client: Client, execution: WorkflowExecution) -> MailboxAccount | None:
    if execution.close_time is not None:
        return None  # no run of it is running: nothing answers
    handle = client.get_workflow_handle_for(AgentWorkflow.run, execution.id)
    try:
        return await handle.query(AgentWorkflow.account, rpc_timeout=ACCOUNT_TIMEOUT)
    except RPCError as exc:
        log.warning("%s gave no account (%s): rebuilt from its histories", execution.id, exc)
        return None


def shown(reading: MailboxReading, event: Event, waiting: set[str]) -> Event:
    """The event as the mailbox wrote it, or would have: settled, or waiting."""
    if event.id in reading.settled:
        return as_mailbox_writes(reading.key, reading.settled[event.id], reading.agent_id)
    if event.id in waiting:
        return as_mailbox_writes(reading.key, event, reading.agent_id)
    typed = reading.typed.get(event.id)
    outcome: Outcome = reading.outcomes.get(event.id) or _typed_outcome(typed)
    note = reading.notes.get(event.id)
    error = None
    if outcome == "rejected":
        error = (typed[1].rejected if typed else None) or note
        note = None
    elif outcome == "failed":
        error = note or (REASON_FORGOTTEN if event.id in reading.outcomes else FORGOTTEN)
        note = None
    at = typed[0] if typed else event.created_at
    settled = settled_event(event, outcome, at, [], error, note)
    return as_mailbox_writes(reading.key, settled, reading.agent_id)


def _typed_outcome(typed: tuple[datetime, DeliveryOutcome] | None) -> Outcome:
    if typed is None:
        return "failed"
    return "rejected" if typed[1].rejected else "delivered"
