"""A call's line as its workflow says it: what the phone plays, who is on it, whether it ended.

The line is the call workflow's query (``CallWorkflow.line``); waiting for it to move is its
update (``wait_line``), which the workflow answers as soon as the line changes. Read by the
socket's call methods (the local phone's long poll) and by an approval's call, which takes over
the turns once the line says the call was answered.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError

from agentcomms.voice.models import Line
from agentcomms.workflow_ids import call_workflow_id
from workflows.call import CallWorkflow, Ended, WaitLine

log = logging.getLogger(__name__)

QUERY_TIMEOUT = timedelta(seconds=3)


class LineReader:
    """Reads calls' lines from their workflows."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def handle(self, call_id: str) -> WorkflowHandle[CallWorkflow, Ended]:
        return self._client.get_workflow_handle_for(CallWorkflow.run, call_workflow_id(call_id))

    async def current(self, call_id: str, *, ready_within_s: float = 0) -> Line | None:
        """The call's line; with `ready_within_s`, waits that long for a turn to be asked."""
        line = await self.now(call_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ready_within_s
        while line is not None and line.state != "ended" and not line.expect:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            line = await self.moved(line, remaining) or line
        return line

    async def now(self, call_id: str) -> Line | None:
        """The line as it is; None when the call is unknown or does not answer."""
        try:
            return await self.handle(call_id).query(CallWorkflow.line, rpc_timeout=QUERY_TIMEOUT)
        except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError) as exc:
            log.debug("no line for %s: %s", call_id, exc)
            return None
        except Exception as exc:  # a query the workflow failed to answer
            log.warning("line query of %s failed: %s", call_id, exc)
            return None

    async def moved(self, line: Line, timeout_s: float) -> Line | None:
        """The line once it moved past `line`, or as it is at the timeout; None when no worker
        answered in time (or the call ended): look again."""
        try:
            return await self.handle(line.call_id).execute_update(
                CallWorkflow.wait_line,
                WaitLine(after_version=line.version, timeout_s=max(timeout_s, 0.1)),
                rpc_timeout=timedelta(seconds=timeout_s + 5),
            )
        except (RPCError, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError):
            await asyncio.sleep(min(timeout_s, 0.5))
            return None
