"""The human's phone takes one call at a time, whoever places it: a ladder's call rung and a call
an agent places each claim it in the projection before anything rings (the call's own row is
the claim, so a call placed either way holds it for the other).

A call's workflow writes its end into the projection; one whose worker died first leaves its
row up. Such a row holds the phone only until Temporal says the call's workflow is closed, and
in any case no longer than the call could last (its ring timeout, its longest duration, and a
slack). A call Temporal does not know yet (its claim written, its workflow about to start)
holds it: only a closed workflow frees the line early.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from agentcomms.config.voice import VoiceConfig
from agentcomms.models import CallRecord
from agentcomms.store import Store
from agentcomms.workflow_ids import call_workflow_id

log = logging.getLogger(__name__)

# Past its ring timeout and longest duration, a call the projection still shows up (its worker
# died before it wrote the end) no longer holds the human's phone, whatever Temporal says.
LINE_HELD_SLACK = timedelta(minutes=2)
# Calls found closed in one claim at most: each costs a look at Temporal.
_MOST_CLOSED = 5
_DESCRIBE_TIMEOUT = timedelta(seconds=3)


def held_since(voice: VoiceConfig, now: datetime) -> datetime:
    """The oldest start of a call that may still hold the human's phone at `now`."""
    longest = timedelta(seconds=voice.ring_timeout_s + voice.max_call_duration_s)
    return now - longest - LINE_HELD_SLACK


async def claim_phone(
    store: Store, client: Client, call: CallRecord, *, since: datetime
) -> str | None:
    """Take the human's phone for `call` (None: it is this call's now, its row written), or the
    id of the call in progress that holds it. A call shown up whose workflow Temporal says is
    closed does not hold it."""
    closed: list[str] = []
    while True:
        busy = await store.claim_line(call, since=since, closed=closed)
        if busy is None or len(closed) >= _MOST_CLOSED or not await workflow_closed(client, busy):
            return busy
        log.info("call %s is shown up but its workflow has closed: the phone is free of it", busy)
        closed.append(busy)


async def workflow_closed(client: Client, call_id: str) -> bool:
    """Whether Temporal says the call's workflow has closed. Not found, or no answer, is not
    closed: a call just claimed starts its workflow after its claim."""
    handle = client.get_workflow_handle(call_workflow_id(call_id))
    try:
        described = await handle.describe(rpc_timeout=_DESCRIBE_TIMEOUT)
    except RPCError as exc:
        log.debug("could not learn whether call %s has closed: %s", call_id, exc)
        return False
    return described.status not in (None, WorkflowExecutionStatus.RUNNING)
