"""A request answered on the phone: the ladder's call says what the agent wants and its keys
("backend asks to run: rm -rf build. Press 1 to allow, 2 to deny, 3 to hear it again"; a
question's options a digit each, "9 to hear it again"; a plan's 1 approve, 2 keep planning), and
the human keys a digit (or several, then #) or says the word or the option. The answer goes
through the one path every surface's answer takes (:meth:`ApprovalMethods.answer`, `via`
"call"), then the call says how it was decided and hangs up.

The call is a ladder's child workflow, which rings on its own; this gateway takes over its turns
once it is answered (a line event it heard), reading each turn's answer from the call itself
(a spoken one transcribed by the call's speech chain).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import Client, WorkflowHandle

from activities.escalation import call_text
from agentcomms.approval_models import ApprovalRequest
from agentcomms.config import Config
from agentcomms.config.voice import LOCAL_PHONE, phone_approver
from agentcomms.errors import RpcError
from agentcomms.trust import DeploymentKey
from agentcomms.voice.callsystem import twilio_configured
from agentcomms.voice.models import Line, LineEvent
from agentcomms.workflow_ids import call_workflow_id
from gateway.approvals.methods import ApprovalMethods, ladder_for
from gateway.approvals.words import PhoneAnswer, heard_on_phone, said
from gateway.socket.protocol import INVALID_PARAMS
from workflows.call import CallWorkflow, End, Ended, Say, TurnResult

log = logging.getLogger(__name__)

# How often the words are said again (the "again" key, or an answer not understood) before
# giving up.
MAX_REPEATS = 3

CurrentLine = Callable[[str], Awaitable[Line | None]]


class ApprovalCalls:
    def __init__(
        self,
        cfg: Config,
        client: Client,
        key: DeploymentKey,
        current_line: CurrentLine,
        approvals: ApprovalMethods,
    ):
        self._client = client
        self._key = key  # signs the call's turns: the call says only what the gateway signed
        self._current_line = current_line
        self._approvals = approvals
        self._cfg = cfg
        # The phone the ladder rings (its number; the local phone without Twilio): who answers.
        self._by = (twilio_configured(cfg) and cfg.voice.phone.to_number) or LOCAL_PHONE
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
        """The call's request, then each other request still open that this phone hears,
        oldest first: one call carries all the human is waited on for (other requests' calls
        wait for it to end), and a request's own call, if one was placed all the same, is hung
        up as it is answered here."""
        handle = self._client.get_workflow_handle_for(CallWorkflow.run, call_workflow_id(call_id))
        try:
            result = await handle.execute_update(CallWorkflow.initiate)
            words = (await handle.query(CallWorkflow.line)).say or ""
            first = await self._approvals.view(approval_id)
            asked = {approval_id}
            while True:
                told = await self._take(handle, call_id, approval_id, result, words)
                if told is None:
                    return
                following = await self._following(first.request, asked) if first else None
                if following is None:
                    await handle.execute_update(
                        CallWorkflow.end, self._end(call_id, f"{told} Goodbye.")
                    )
                    return
                approval_id = following.id
                asked.add(approval_id)
                words = call_text(ladder_for(following, []))
                result = await handle.execute_update(
                    CallWorkflow.say,
                    self._key.sign_turn(call_id, Say(message=f"{told} Next, {words}")),
                )
        except Exception as exc:  # the call ended under us, or Temporal is away
            log.warning("call %s about approval %s: %s", call_id, approval_id, exc)
        finally:
            self._driving.discard(call_id)

    async def _take(
        self,
        handle: WorkflowHandle[CallWorkflow, Ended],
        call_id: str,
        approval_id: str,
        result: TurnResult,
        words: str,
    ) -> str | None:
        """One request's answer keyed or said on the call: what the call says of it; None when
        the call is over (hung up, silent until the turn timed out, or no answer was taken)."""
        for _ in range(MAX_REPEATS):
            if result.status == "timed-out":
                # Nothing heard: the line goes back to the ladders waiting for the phone.
                await handle.execute_update(
                    CallWorkflow.end, self._end(call_id, "No answer was heard. Goodbye.")
                )
            if result.status != "answered":
                return None
            view = await self._approvals.view(approval_id)
            choice = heard_on_phone(view.request, result.response) if view else None
            if view is None or choice is not None:
                return await answer_by_phone(
                    self._cfg, self._approvals, approval_id, choice, self._by
                )
            result = await handle.execute_update(
                CallWorkflow.say, self._key.sign_turn(call_id, Say(message=words))
            )
        await handle.execute_update(
            CallWorkflow.end, self._end(call_id, "No answer was taken. Goodbye.")
        )
        return None

    async def _following(self, first: ApprovalRequest, asked: set[str]) -> ApprovalRequest | None:
        """The oldest request still open that this call has not asked and this phone hears
        (whichever agent's: the human's phone takes one call at a time, and other requests'
        calls wait for this one), keyed as the call takes keys (one, or several then #)."""
        for view in await self._approvals.open_views():
            request = view.request
            if (
                request.id not in asked
                and request.multi == first.multi
                and self._cfg.phone_hears(request.agent_id, self._by)
            ):
                return request
        return None

    def _end(self, call_id: str, goodbye: str) -> End:
        return self._key.sign_turn(call_id, End(message=goodbye))


async def answer_by_phone(
    cfg: Config,
    approvals: ApprovalMethods,
    approval_id: str,
    choice: PhoneAnswer | None,
    by: str,
) -> str:
    """Answer the request as keyed or said on a phone (`by`: its number, or LOCAL_PHONE), when
    that phone may answer it (one of the agent's approvers, or the agent names none); what the
    phone then says of it: "Done: denied.", or how it was decided already."""
    view = await approvals.view(approval_id) if choice is not None else None
    if choice is None or view is None:
        return "That request is gone."
    agent_id = view.request.agent_id
    if not cfg.phone_hears(agent_id, by):
        log.warning(
            "approval %s: refused an answer from %s, not one of %s's approvers (%s)",
            approval_id,
            by,
            agent_id,
            phone_approver(by),
        )
        return "That request is not this phone's to answer."
    try:
        done = await approvals.answer(
            approval_id, choice.behavior, by=by, via="call", message=None, answer=choice.answer
        )
    except RpcError as exc:
        if exc.code == INVALID_PARAMS:  # not shown whole on a call: where to answer it
            return f"{exc.message[:1].upper()}{exc.message[1:]}."
        return "That request is gone."
    view = await approvals.view(approval_id)
    how = said(view) if view is not None else "answered"
    if done["accepted"]:
        return f"Done: {how.split(' by ')[0]}."
    return f"It was answered already: {how}."
