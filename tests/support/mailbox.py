"""Replaying an agent's mailbox: its histories, taken between workflow tasks, replayed inside the
sandbox, so a change that makes a running mailbox non-deterministic fails a test first."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHandle, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from agentcomms.workflow_ids import mailbox_id
from tests.support.stack import Stack
from tests.support.waiting import eventually
from workflows.mailbox.models import AgentSnapshot
from workflows.mailbox.workflow import AgentWorkflow


async def settled_history(handle: WorkflowHandle[Any, Any]) -> WorkflowHistory | None:
    """The mailbox's history, or None while it ends inside a workflow task."""
    history = await handle.fetch_history()
    last = history.events[-1]
    busy = last.HasField("workflow_task_scheduled_event_attributes") or last.HasField(
        "workflow_task_started_event_attributes"
    )
    return None if busy else history


async def every_run(stack: Stack, agent: str) -> list[WorkflowHistory]:
    """The histories of every run of the agent's mailbox, oldest first, each between tasks."""
    query = f"WorkflowId = '{mailbox_id(agent)}'"
    runs = [wf.run_id async for wf in stack.client.list_workflows(query)]
    histories = []
    for run_id in runs:
        handle = stack.client.get_workflow_handle(mailbox_id(agent), run_id=run_id)
        histories.append(await eventually(functools.partial(settled_history, handle)))
    return sorted(histories, key=lambda h: h.events[0].event_time.ToDatetime())


def signal_payloads(history: WorkflowHistory, name: str) -> list[Payload]:
    """The payloads of every `name` signal a workflow's history took, in order: what anyone
    who reads the history can copy."""
    return [
        payload
        for event in history.events
        if event.HasField("workflow_execution_signaled_event_attributes")
        and event.workflow_execution_signaled_event_attributes.signal_name == name
        for payload in event.workflow_execution_signaled_event_attributes.input.payloads
    ]


def _local_activity_markers(history: WorkflowHistory) -> Iterator[tuple[HistoryEvent, Any]]:
    """Each local activity's marker event with its recorded data (type, times), in order."""
    for event in history.events:
        if event.HasField("marker_recorded_event_attributes"):
            data = event.marker_recorded_event_attributes.details.get("data")
            for payload in data.payloads if data else []:
                yield event, json.loads(payload.data)


def local_activities(history: WorkflowHistory) -> list[str]:
    """The types of the local activities a history ran, in order (read from their markers)."""
    return [data.get("activity_type", "") for _, data in _local_activity_markers(history)]


@dataclass
class Delivery:
    """One `deliver_to_pane` as its marker records it."""

    summary: str
    answered: int  # outcomes: the messages it got through
    seconds: float  # from its scheduling to its completion


def deliveries(history: WorkflowHistory) -> list[Delivery]:
    """The mailbox's `deliver_to_pane` local activities, in order."""
    found = []
    for event, data in _local_activity_markers(history):
        if data.get("activity_type") != "deliver_to_pane":
            continue
        result = event.marker_recorded_event_attributes.details.get("result")
        answered = len(json.loads(result.payloads[0].data)) if result and result.payloads else 0
        summary = json.loads(event.user_metadata.summary.data or b'""')
        seconds = _seconds(data["complete_time"]) - _seconds(data["original_schedule_time"])
        found.append(Delivery(summary=summary, answered=answered, seconds=seconds))
    return found


def _seconds(moment: dict[str, int]) -> float:
    return moment["seconds"] + moment["nanos"] / 1e9


def mailbox_replayer() -> Replayer:
    # Inside the sandbox, though the worker runs the mailbox outside it: a call that is not
    # deterministic (the clock, randomness, I/O) raises here instead of forking a replay later.
    return Replayer(
        workflows=[AgentWorkflow],
        data_converter=pydantic_data_converter,
        unsandboxed_workflow_runner=SandboxedWorkflowRunner(),
    )


async def unreachable(stack: Stack, agent: str) -> AgentSnapshot | None:
    """The mailbox's state, once it finds the agent's pane unreachable (for ``eventually``)."""
    state = await stack.gateway.mailbox.snapshot(agent)
    return state if state is not None and state.status == "unreachable" else None


async def offline(stack: Stack, agent: str) -> AgentSnapshot | None:
    """The mailbox's state, once its agent has no pane (unregistered; for ``eventually``)."""
    state = await stack.gateway.mailbox.snapshot(agent)
    return (
        state
        if state is not None and state.status == "offline" and not state.registration
        else None
    )


def record_histories(histories: list[WorkflowHistory], name: str) -> None:
    """Keep these histories among the recorded ones, which every later change must still replay:
    AGENTCOMMS_RECORD_HISTORIES=tests/histories pytest tests/test_agent_workflow_replay.py"""
    folder = os.environ.get("AGENTCOMMS_RECORD_HISTORIES")
    if not folder:
        return
    for i, history in enumerate(histories):
        suffix = f"-run{i + 1}" if len(histories) > 1 else ""
        (Path(folder) / f"{name}{suffix}.json").write_text(history.to_json())


async def online(stack: Stack, agent: str) -> AgentSnapshot | None:
    """The mailbox's state, once it took a registration (it has the worker check it first)."""
    state = await stack.gateway.mailbox.snapshot(agent)
    return state if state is not None and state.registration is not None else None
