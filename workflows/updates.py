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
from temporalio.service import RPCError


async def wait_update(
    handle: WorkflowHandle[Any, Any],
    update: Any,  # the workflow's update method
    request: Callable[[float], Any],
    timeout_s: float,
    *,
    moved: Callable[[Any], bool],
) -> Any:
    """Run `update` with `request(seconds left)` until it answers, asking the next run again
    when it says the workflow `moved` (continued-as-new); None when the timeout passes or no
    worker answered in time (what was asked about is durable, just not done)."""
    deadline = time.monotonic() + timeout_s
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
        except (
            TimeoutError,
            RPCError,
            WorkflowUpdateFailedError,
            WorkflowUpdateRPCTimeoutOrCancelledError,
        ):
            return None
        if not moved(answer):
            return answer
    return None
