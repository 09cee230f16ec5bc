"""Asking a workflow "is it done yet?" through an update that waits, across continue-as-new."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio.client import (
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

# Failures that say "this run will not answer" rather than "the answer is no": the run the update
# reached ended (continued-as-new) before answering it, or finished its task without reading it.
# The next run answers when asked again.
ASK_AGAIN = frozenset({"AcceptedUpdateCompletedWorkflow", "UnprocessedUpdate"})
FIRST_PAUSE_S, PAUSE_CAP_S = 0.2, 2.0


async def wait_update(
    handle: WorkflowHandle[Any, Any],
    update: Any,  # the workflow's update method
    request: Callable[[float], Any],
    timeout_s: float,
    *,
    moved: Callable[[Any], bool],
) -> Any:
    """Run `update` with `request(seconds left)` until it answers, asking the next run again
    when it says the workflow `moved` (continued-as-new) or a run ended before it answered, and
    again after a transient server error; None when the timeout passes, no worker answered in
    time, or the workflow is gone (what was asked about is durable, just not done)."""
    deadline = time.monotonic() + timeout_s
    pause = FIRST_PAUSE_S
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            answer = await asyncio.wait_for(
                handle.execute_update(
                    update,
                    request(min(remaining, 300)),
                    rpc_timeout=timedelta(seconds=remaining + 5),
                ),
                timeout=remaining + 1,
            )
        except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
            return None
        except (RPCError, WorkflowUpdateFailedError) as exc:
            if not _ask_again(exc):
                return None
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, PAUSE_CAP_S)
            continue
        if not moved(answer):
            return answer
    return None


def _ask_again(exc: RPCError | WorkflowUpdateFailedError) -> bool:
    if isinstance(exc, RPCError):
        # A workflow that does not exist will not answer; a busy or restarting server will.
        return exc.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT)
    cause = exc.cause
    return isinstance(cause, ApplicationError) and cause.type in ASK_AGAIN
