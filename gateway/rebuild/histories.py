"""What Temporal still keeps of a kind of workflow: each workflow's runs, oldest first, and of
each run its input, the signals it took, and what its activities did, decoded with the
deployment's data converter (encrypted payloads are opened as every process opens them).

Only reading: nothing here signals, starts or changes a workflow.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client, WorkflowExecution

T = TypeVar("T")

# Where Temporal's own SDK core records a local activity: a marker of this name, whose "data"
# detail names the activity and when it completed, and whose "result" detail is its result.
LOCAL_ACTIVITY_MARKER = "core_local_activity"


@dataclass
class Signal:
    name: str
    payloads: Payloads
    at: datetime


@dataclass
class LocalActivity:
    """A local activity that completed: its result (None when it failed) and when."""

    activity_type: str
    result: Payloads | None
    at: datetime


@dataclass
class Activity:
    """An activity the run scheduled, and how it ended (neither: it still runs)."""

    activity_type: str
    activity_id: str
    input: Payloads
    result: Payloads | None = None
    failure: str | None = None  # why it failed for good (its last attempt's own sentence)
    at: datetime | None = None  # when it ended


@dataclass
class Run:
    workflow_id: str
    run_id: str
    running: bool
    input: Payloads | None = None
    signals: list[Signal] = field(default_factory=list)
    local_activities: list[LocalActivity] = field(default_factory=list)
    activities: list[Activity] = field(default_factory=list)
    result: Payloads | None = None  # what it returned, once completed
    failure: str | None = None  # why it ended without completing (failed, terminated, timed out)

    def signalled(self, name: str) -> list[Signal]:
        return [s for s in self.signals if s.name == name]

    def local(self, activity_type: str) -> list[LocalActivity]:
        return [a for a in self.local_activities if a.activity_type == activity_type]


async def workflows_of_type(
    client: Client, workflow_type: str
) -> dict[str, list[WorkflowExecution]]:
    """Every workflow of the type that Temporal still keeps, by id, each with its runs (those
    closed by continue-as-new included), oldest first."""
    runs: dict[str, list[WorkflowExecution]] = defaultdict(list)
    async for execution in client.list_workflows(f'WorkflowType = "{workflow_type}"'):
        runs[execution.id].append(execution)
    for executions in runs.values():
        executions.sort(key=lambda e: (e.start_time, e.run_id))
    return dict(runs)


async def read_run(client: Client, execution: WorkflowExecution) -> Run:
    """One run's input, signals and activities, from its history."""
    run = Run(
        workflow_id=execution.id,
        run_id=execution.run_id,
        running=execution.close_time is None,
    )
    scheduled: dict[int, Activity] = {}
    handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
    async for event in handle.fetch_history_events():
        at = event.event_time.ToDatetime(tzinfo=UTC)
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            run.input = event.workflow_execution_started_event_attributes.input
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            signal = event.workflow_execution_signaled_event_attributes
            run.signals.append(Signal(signal.signal_name, signal.input, at))
        elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            local = _local_activity(event.marker_recorded_event_attributes, at)
            if local is not None:
                run.local_activities.append(local)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            run.result = event.workflow_execution_completed_event_attributes.result
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            run.failure = _sentence(event.workflow_execution_failed_event_attributes.failure)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            run.failure = event.workflow_execution_terminated_event_attributes.reason or "ended"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
            run.failure = "timed out"
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = Activity(
                attrs.activity_type.name, attrs.activity_id, attrs.input
            )
            run.activities.append(scheduled[event.event_id])
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            done = event.activity_task_completed_event_attributes
            if (ended := scheduled.get(done.scheduled_event_id)) is not None:
                ended.result, ended.at = done.result, at
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            failed = event.activity_task_failed_event_attributes
            if (ended := scheduled.get(failed.scheduled_event_id)) is not None:
                ended.failure, ended.at = _sentence(failed.failure), at
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
            timed_out = event.activity_task_timed_out_event_attributes
            if (ended := scheduled.get(timed_out.scheduled_event_id)) is not None:
                ended.failure, ended.at = _sentence(timed_out.failure), at
    return run


async def decode(client: Client, payloads: Payloads | None, as_type: type[T]) -> T | None:
    """The first value of `payloads` as `as_type`; None when there is none."""
    if payloads is None or not payloads.payloads:
        return None
    values: list[Any] = await client.data_converter.decode(payloads.payloads, [as_type])
    return values[0] if values else None


def _local_activity(marker: Any, at: datetime) -> LocalActivity | None:
    if marker.marker_name != LOCAL_ACTIVITY_MARKER or "data" not in marker.details:
        return None
    data = json.loads(marker.details["data"].payloads[0].data or b"{}")
    result = marker.details["result"] if "result" in marker.details else None
    if complete := data.get("complete_time"):
        at = datetime.fromtimestamp(complete["seconds"] + complete["nanos"] / 1e9, UTC)
    return LocalActivity(str(data.get("activity_type", "")), result, at)


def _sentence(failure: Failure) -> str:
    """An activity's own sentence for why it failed, also behind a timeout that gave up."""
    at: Failure | None = failure
    while at is not None:
        if at.HasField("application_failure_info"):
            return at.message
        at = at.cause if at.HasField("cause") else None
    return failure.message
