"""A permission request answered on the phone: the ladder's call says what the agent wants
("backend asks to run: rm -rf build. Press 1 to allow, 2 to deny, 3 to hear it again") and the
human keys a digit or says the word. The answer decides the request through the gateway's one
decide path (`via` "call"), then the call says how it was decided and hangs up.

The call is a ladder's child workflow, which rings on its own; this gateway takes over its turns
once it is answered (a line event it heard), reading each turn's answer from the call itself
(a spoken one transcribed by the call's speech chain).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import Client

from agentcomms.approval_models import Behavior
from agentcomms.config import Config
from agentcomms.voice.models import Line, LineEvent
from agentcomms.workflow_ids import call_workflow_id
from gateway.approval_surfaces.words import said
from workflows.approval.models import Decided
from workflows.call import CallWorkflow, End, Say

log = logging.getLogger(__name__)

# A key, or the word for it, as a person says it.
ANSWERS: dict[str, Behavior | None] = {
    "1": "allow",
    "one": "allow",
    "allow": "allow",
    "yes": "allow",
    "2": "deny",
    "two": "deny",
    "deny": "deny",
    "no": "deny",
}
# How often the words are said again ("3", or an answer not understood) before giving up.
MAX_REPEATS = 3

Decide = Callable[[str, Behavior, str], Awaitable[Decided | None]]
CurrentLine = Callable[[str], Awaitable[Line | None]]


def heard_answer(response: str) -> Behavior | None:
    """allow or deny for a key or a word heard; None for anything else (say it again)."""
    words = re.findall(r"[a-z0-9]+", response.lower())
    return ANSWERS.get(words[0]) if words else None


class ApprovalCalls:
    def __init__(self, cfg: Config, client: Client, current_line: CurrentLine, decide: Decide):
        self._client = client
        self._current_line = current_line
        self._decide = decide
        self._by = cfg.voice.phone.to_number or "the local phone"
        self._driving: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    async def line_event(self, call_id: str, event: LineEvent) -> None:
        """Heard on a call's line: once a request's call is answered, its turns are ours."""
        if event.kind != "answered" or call_id in self._driving:
            return
        line = await self._current_line(call_id)
        if line is None or line.approval_id is None:
            return
        self._driving.add(call_id)
        task = asyncio.create_task(self._drive(call_id, line.approval_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop taking calls' turns (the gateway closing); a call left alone times out."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _drive(self, call_id: str, approval_id: str) -> None:
        handle = self._client.get_workflow_handle_for(CallWorkflow.run, call_workflow_id(call_id))
        try:
            first = await handle.execute_update(CallWorkflow.initiate)
            words = (await handle.query(CallWorkflow.line)).say or ""
            result = first
            for _ in range(MAX_REPEATS):
                if result.status != "answered":
                    return  # hung up, or silent until the turn timed out
                behavior = heard_answer(result.response)
                if behavior is not None:
                    decided = await self._decide(approval_id, behavior, self._by)
                    await handle.execute_update(CallWorkflow.end, End(message=_told(decided)))
                    return
                result = await handle.execute_update(CallWorkflow.say, Say(message=words))
            await handle.execute_update(
                CallWorkflow.end, End(message="No answer was taken. Goodbye.")
            )
        except Exception as exc:  # the call ended under us, or Temporal is away
            log.warning("call %s about approval %s: %s", call_id, approval_id, exc)
        finally:
            self._driving.discard(call_id)


def _told(decided: Decided | None) -> str:
    if decided is None:
        return "That request is gone. Goodbye."
    how = said(decided.view)
    if decided.accepted:
        return f"Done: {how.split(' by ')[0]}. Goodbye."
    return f"It was answered already: {how}. Goodbye."
