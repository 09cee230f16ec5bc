"""The phone calls as the projection showed them (`agentcomms calls`), from their workflows
(``call-<id>``): who placed each for which agent and when, from its signed input; how a call
still up stands, from its line (a query); how an ended one ended, from its result."""

from __future__ import annotations

import logging
from datetime import timedelta

from temporalio.client import Client, WorkflowExecution
from temporalio.service import RPCError

from agentcomms.models import CallRecord, CallStatus
from agentcomms.trust import DeploymentKey
from agentcomms.voice.audio import AudioStore
from agentcomms.voice.models import CallInput, Line
from gateway.rebuild.histories import decode, read_run
from workflows.call.models import Ended
from workflows.call.workflow import CallWorkflow

log = logging.getLogger(__name__)

LINE_TIMEOUT = timedelta(seconds=3)
# A call still up, by what its line shows.
_UP: dict[str, CallStatus] = {
    "dialing": "dialing",
    "ringing": "ringing",
    "connected": "in-progress",
    "ended": "in-progress",  # hung up, its workflow finishing
}


async def rebuild_call(
    client: Client, key: DeploymentKey, audio: AudioStore, runs: list[WorkflowExecution]
) -> CallRecord | None:
    """The call's row; None when the deployment did not place it (its input is not signed)."""
    newest = runs[-1]
    run = await read_run(client, newest)
    call = await decode(client, run.input, CallInput)
    if call is None or not key.call_is_genuine(call):
        return None
    record = CallRecord(
        id=call.call_id,
        agent_id=call.agent_id,
        status="in-progress",
        phone_number=call.to_number or call.system,
        started_at=newest.start_time,
        ended_at=newest.close_time,
        transcript_ref=audio.transcript_ref(call.call_id),
    )
    if newest.close_time is None:
        handle = client.get_workflow_handle_for(CallWorkflow.run, newest.id)
        try:
            line: Line = await handle.query(CallWorkflow.line, rpc_timeout=LINE_TIMEOUT)
        except RPCError as exc:
            log.warning("%s did not say how it stands (%s): shown in progress", newest.id, exc)
            return record
        record.status = _UP[line.state]
        return record
    ended = await decode(client, run.result, Ended)
    if ended is None:
        record.status, record.error = "failed", run.failure
        return record
    record.status, record.duration_seconds = ended.status, ended.duration_seconds
    record.error = ended.reason if ended.status == "failed" else None
    return record
