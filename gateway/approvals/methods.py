"""The socket methods of approvals: an agent's hook opens one and waits for its answer; the human
lists them and answers (`agentcomms approvals`, `approve`, `deny`, `answer`).

What the agent asks comes in three kinds: a permission to use a tool, a question with options
(Claude Code's ``AskUserQuestion``: one approval per question), and a plan to carry out
(``ExitPlanMode``: approved, or sent back with the human's reason).

The request is opened as the agent sent it, its input shown visibly (nothing deleted, nothing
masked: :mod:`agentcomms.visible`; a chat hides what it must, saying so, and is then no place to
answer it: :mod:`gateway.approvals.words`), and signed with the deployment key; so is every answer the gateway records. The decision handed
to the hook is derived from the signed request and the signed answer only: an approval or an
answer someone else put into Temporal makes no hook allow anything. None of these methods is open
to an agent's own requests, and no process in an agent's pane answers (:mod:`gateway.socket.confine`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import Client

from agentcomms.agents.hook import trimmed
from agentcomms.approval_models import (
    ApprovalRequest,
    ApprovalView,
    Behavior,
    Decision,
    chosen,
)
from agentcomms.bridge.sanitize import sanitize
from agentcomms.config import Config
from agentcomms.errors import RpcError
from agentcomms.escalation_models import Escalation, QuietHours, Rung
from agentcomms.models import utcnow
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from gateway.agents.budget import Budgets
from gateway.agents.hooks import PaneAgents
from gateway.approvals.asks import (
    QUESTION_CHARS,
    QUESTION_TOOL,
    acp_asked,
    asked_with,
    shown_visibly,
)
from gateway.approvals.chat_posts import ApprovalChats
from gateway.approvals.decision import hook_decision
from gateway.approvals.params import (
    ApprovalDecideParams,
    ApprovalOpenParams,
    ApprovalsListParams,
    ApprovalWaitParams,
)
from gateway.approvals.words import (
    LETTING,
    asks,
    binding,
    hidden_on,
    keys,
    reply_with,
    shown_remotely,
)
from gateway.socket.caller import Caller
from gateway.socket.declare import Hook, Human, declare
from gateway.socket.protocol import INVALID_PARAMS, NOT_FOUND, NOT_YOURS
from workflows.approval.client import Approvals, WorkflowAlreadyStartedError, new_approval_id
from workflows.approval.models import Decided

log = logging.getLogger(__name__)

ID_TRIES = 8
# How long each look at an approval past its deadline waits for Temporal to record the timeout.
DEADLINE_LOOK_S = 30


def _closes_as_answered_in_the_pane(p: ApprovalDecideParams) -> bool:
    """What an agent's hook, in the agent's pane, may say of an approval: that the human
    answered it in the agent's own dialog. It allows and denies nothing."""
    return p.behavior == "terminal"


class ApprovalMethods:
    def __init__(
        self,
        cfg: Config,
        client: Client,
        key: DeploymentKey,
        panes: PaneAgents,
        chats: ApprovalChats,
        store: Store,
        *,
        observers: Sequence[Callable[[ApprovalView], None]] = (),
    ) -> None:
        self._cfg = cfg
        self._budgets = Budgets(cfg, store)
        self._chats = chats
        self._key = key
        self._panes = panes
        self._approvals = Approvals(client, cfg.temporal.task_queue)
        # The approvals this gateway opened that may still be open, each with the agent, tool
        # and input (as the hook reports them) whose run or end means it was answered elsewhere.
        self._waiting: dict[str, tuple[str, str, Any]] = {}
        # Who else shows approvals (push notifications, the console): told of each one opened
        # here and of each decision recorded here, whatever surface gave it.
        self.observers: list[Callable[[ApprovalView], None]] = list(observers)
        self._deadlines: set[asyncio.Task[None]] = set()

    @declare(Hook())
    async def approval_open(self, p: ApprovalOpenParams) -> dict[str, Any]:
        """One approval for a permission or a plan, one per question for a tool that asks
        several: `ids` in the order asked (`id` is the first)."""
        agent_id = await self._panes.agent_of(p.agent_id, p.pane, p.tmux_socket)
        # Only what the agent offered for this session: "allow for this session" never widens
        # the agent's settings on disk.
        session = [s for s in p.permission_suggestions if s.get("destination") == "session"]
        # One ladder's worth of the agent's budget, however many questions the tool asks; past
        # it the request still reaches the chats, the console and the terminal.
        refused = await self._budgets.ladder_refusal(agent_id)
        if refused is not None:
            log.warning("%s asks to use %s without a ladder: %s", agent_id, p.tool_name, refused)
        ids = []
        tool = shown_visibly(p.tool_name, 200)
        asked_how = (
            [acp_asked(p.tool_name, p.tool_input, p.options)]
            if p.kind == "acp"
            else asked_with(p.tool_name, p.tool_input)
        )
        for one in asked_how:
            request = ApprovalRequest(
                id="",
                agent_id=agent_id,
                kind=p.kind,
                tool=tool.text,
                input_text=one.input_text,
                whole=one.whole and not tool.truncated,
                suggestions=session if one.ask == "permission" else [],
                timeout_s=self._cfg.approvals.timeout_s,
                on_timeout=self._cfg.approval_on_timeout(agent_id),
                ask=one.ask,
                question=one.question,
                options=one.options,
                multi=one.multi,
            )
            ids.append(await self._open(request, ladder=refused is None))
        asked = (agent_id, p.tool_name, _as_reported(p.tool_name, p.tool_input))
        self._waiting.update(dict.fromkeys(ids, asked))
        timeout_s = self._cfg.approvals.timeout_s
        opened = {"id": ids[0], "ids": ids, "agent_id": agent_id, "timeout_s": timeout_s}
        return opened if refused is None else {**opened, "note": f"no ladder: {refused}"}

    async def open_read(self, unsigned: ApprovalRequest) -> str:
        """Open a request the gateway read off an agent's pane (no hook asked); its id."""
        refused = await self._budgets.ladder_refusal(unsigned.agent_id)
        approval_id = await self._open(unsigned, ladder=refused is None)
        self._waiting[approval_id] = (unsigned.agent_id, unsigned.tool, None)
        return approval_id

    async def _open(self, unsigned: ApprovalRequest, *, ladder: bool) -> str:
        for _ in range(ID_TRIES):
            request = self._key.sign_approval(unsigned.model_copy(update={"id": new_approval_id()}))
            try:
                await self._approvals.open(request, self._escalation(request) if ladder else None)
            except WorkflowAlreadyStartedError:
                continue  # a short id is taken now and then: draw another
            self._chats.announce(request)
            self._tell(ApprovalView(request=request, opened_at=utcnow()))
            self._watch_deadline(request.id, request.timeout_s)
            log.info(
                "approval %s opened: agent %s asks (%s) %s",
                request.id,
                request.agent_id,
                request.ask,
                request.tool,
            )
            return request.id
        raise RpcError(NOT_FOUND, "no free approval id after several tries; try again")

    def _escalation(self, request: ApprovalRequest) -> Escalation | None:
        """The agent's ladder for this request, signed; None when the config has none."""
        rungs, quiet, never_sleeps = self._cfg.escalation_for(request.agent_id)
        if not rungs:
            return None
        return self._key.sign_escalation(
            ladder_for(request, rungs, quiet=quiet, overrides_quiet=never_sleeps)
        )

    @declare(Hook())
    async def approval_wait(self, p: ApprovalWaitParams) -> dict[str, Any]:
        """Long-polls: `decided` with the hook's answer (None: leave it to the terminal), or
        `open` when `wait_s` passed first, for the hook to ask again."""
        await self._agents_own(p.id, p.agent_id, "waits on")
        view = await self.wait_decided(p.id.upper(), p.wait_s)
        if view is None:
            return {"status": "open"}
        return {
            "status": "decided",
            "decision": hook_decision(self._key, view, p.id.upper()),
            **_summary(view),
        }

    async def wait_decided(self, approval_id: str, wait_s: float) -> ApprovalView | None:
        """The approval once decided (every surface told how), or None after `wait_s`."""
        view = await self._approvals.wait(approval_id, wait_s)
        if view is None:
            return None
        if self._waiting.pop(view.request.id, None) is not None:
            self._tell(view)  # decided where this gateway did not hear it (a timeout)
        self._chats.settle(view)
        return view

    async def _agents_own(self, approval_id: str, agent_id: str | None, does: str) -> None:
        """Refuse a hook in agent ``agent_id``'s pane a request of another agent's."""
        if agent_id is None:
            return
        asked = await self._approvals.view(approval_id.upper())
        if asked is not None and asked.request.agent_id != agent_id:
            raise RpcError(
                NOT_YOURS,
                f"approval {approval_id.upper()} is agent {asked.request.agent_id!r}'s, and this "
                f"hook runs in agent {agent_id!r}'s pane: a hook {does} only its own agent's "
                "requests.",
            )

    async def watch_open(self) -> None:
        """After a restart, watch the approvals still open to their deadlines again, as when
        they opened: one whose hook is gone still closes in the console and the chats."""
        for view in await self.open_views():
            request = view.request
            # What a tool's run would match is not kept; a turn's end still closes it.
            self._waiting.setdefault(request.id, (request.agent_id, request.tool, None))
            deadline = view.opened_at + timedelta(seconds=request.timeout_s)
            self._watch_deadline(request.id, max(0.0, (deadline - utcnow()).total_seconds()))

    def _watch_deadline(self, approval_id: str, timeout_s: float) -> None:
        watch = asyncio.create_task(self._closed_at_deadline(approval_id, timeout_s))
        self._deadlines.add(watch)
        watch.add_done_callback(self._deadlines.discard)

    async def _closed_at_deadline(self, approval_id: str, timeout_s: float) -> None:
        """Unanswered, an approval times out in Temporal, and the hook waiting for it tells
        everyone (`approval_wait`). With no hook left waiting (the agent killed, or its hook
        given up first) this tells them instead: no console card or chat button stays open."""
        await asyncio.sleep(timeout_s)
        while approval_id in self._waiting:
            try:
                view = await self._approvals.wait(approval_id, DEADLINE_LOOK_S)
            except Exception as exc:  # Temporal away for a moment: look again
                log.warning("approval %s: cannot look whether it timed out: %s", approval_id, exc)
                await asyncio.sleep(DEADLINE_LOOK_S)
                continue
            if view is not None and self._waiting.pop(approval_id, None) is not None:
                self._tell(view)
                self._chats.settle(view)

    async def close(self) -> None:
        for watch in list(self._deadlines):
            watch.cancel()
        await asyncio.gather(*self._deadlines, return_exceptions=True)

    @declare(Human(decides=True, pane_may=_closes_as_answered_in_the_pane))
    async def approval_decide(self, p: ApprovalDecideParams, caller: Caller) -> dict[str, Any]:
        """Who answered is the connection's (its user and terminal), never what the request
        says: a request can name anyone."""
        by = caller.peer.said() if caller.peer is not None else "the terminal's user"
        await self._agents_own(p.id, p.agent_id, "closes")
        return await self.answer(
            p.id, p.behavior, by=by, via=p.via, message=p.message, answer=p.answer
        )

    async def answer(
        self,
        approval_id: str,
        behavior: Behavior,
        *,
        by: str,
        via: str,
        message: str | None,
        answer: str | None = None,
        shown: str | None = None,
    ) -> dict[str, Any]:
        """A person's answer from the terminal, the console or a phone (`via` "call"); the first
        answer wins. A question's `answer` is checked against its options here. `shown`: the
        binding of the request the person was shown (a console card's), when it is known."""
        approval_id = approval_id.upper()
        checked = None
        if behavior in ("allow", "allow_session", "answer"):
            view = await self._approvals.view(approval_id)
            if view is not None and view.open:
                checked = _checked_answer(view.request, behavior, answer)
        decided = await self.decide(
            Decision(
                approval_id=approval_id,
                behavior=behavior,
                message=_shown(message, 2_000) if message else None,
                answer=checked,
                by=_shown(by, 100),
                via=via,
            ),
            shown=shown,
        )
        if decided is None:
            raise RpcError(
                NOT_FOUND,
                f"no approval {approval_id!r}; `agentcomms approvals` lists the open ones",
            )
        return {"accepted": decided.accepted, **_summary(decided.view)}

    async def view(self, approval_id: str) -> ApprovalView | None:
        """The approval as it stands (None: no such approval)."""
        return await self._approvals.view(approval_id.upper())

    async def decide(self, decision: Decision, *, shown: str | None = None) -> Decided | None:
        """Sign the answer for the request the approval holds and give it to the approval; the
        chats hear how it was decided. Every surface's answer comes through here (a chat's:
        :mod:`gateway.approvals.words`). None: no such approval. A surface that did not
        show the request whole may deny it, never let the agent go on with it."""
        view = await self._approvals.view(decision.approval_id)
        if view is None:
            return None
        request = view.request
        if shown is not None and shown != binding(request):
            raise RpcError(
                INVALID_PARAMS,
                f"approval {request.id} is another request now than the one you answered (an "
                "earlier one had that id): nothing changed; read it again before you answer it",
            )
        hidden = hidden_on(request, decision.via)
        if view.open and decision.behavior in LETTING and hidden is not None:
            raise RpcError(INVALID_PARAMS, f"not taken: {hidden}")
        # Bound to this request: an answer copied from it answers no other request, also not
        # a later one that draws the same short id once Temporal has forgotten this one.
        signed = self._key.sign_decision(decision, request)
        decided = await self._approvals.decide(signed)
        self._waiting.pop(decision.approval_id, None)
        if decided is not None and decided.view.decision is not None:
            self._chats.settle(decided.view)
            if decided.accepted:
                self._tell(decided.view)
        return decided

    def _tell(self, view: ApprovalView) -> None:
        for observer in self.observers:
            try:
                observer(view)
            except Exception:
                log.exception("approval %s: an observer failed", view.request.id)

    async def agent_did(self, agent_id: str, event: str, payload: dict[str, Any]) -> None:
        """Answered in the agent's own dialog, Claude leaves the hook waiting: the tool's run
        (or failure) says so, and a turn's end or the session's leaves nothing to ask."""
        if event in ("PostToolUse", "PostToolUseFailure", "AfterTool"):
            tool, tool_input = payload.get("tool_name"), payload.get("tool_input")
            done = (agent_id, tool, _as_reported(str(tool), tool_input, trim=False))
            answered = [i for i, w in self._waiting.items() if w == done]
        elif event in ("Stop", "StopFailure", "AfterAgent", "SessionEnd"):
            answered = [i for i, w in self._waiting.items() if w[0] == agent_id]
        else:
            return
        for approval_id in answered:
            self._waiting.pop(approval_id, None)
            decision = Decision(
                approval_id=approval_id, behavior="terminal", by="the terminal", via="terminal"
            )
            try:
                await self.decide(decision)
            except Exception:
                log.exception("approval %s: could not close it as answered", approval_id)

    @declare(Human())
    async def approvals(self, p: ApprovalsListParams) -> dict[str, Any]:
        """The approvals open now, each shown whole."""
        return {"approvals": [_listed(view) for view in await self.open_views()]}

    async def open_views(self) -> list[ApprovalView]:
        """The approvals still waiting for an answer, in the order they were asked."""
        views = []
        for approval_id in await self._approvals.open_ids():
            view = await self._approvals.view(approval_id)
            if view is not None and view.open:
                views.append(view)
        return views


def ladder_for(
    request: ApprovalRequest,
    rungs: list[Rung],
    *,
    quiet: QuietHours | None = None,
    overrides_quiet: bool = False,
    opened_at: datetime | None = None,
) -> Escalation:
    """The request's ladder (unsigned): what its SMS and its call say, and how each is answered."""
    # Texted and spoken through providers: secrets hidden, and where a text or a call does not
    # show it whole, where to answer it instead of how.
    shown = shown_remotely(request)
    return Escalation(
        subject_id=request.id,
        agent_id=request.agent_id,
        text=asks(shown, spoken=True),
        keys=keys(request, hidden=hidden_on(request, "call")),
        several_keys=request.multi,
        reply=reply_with(request, hidden=hidden_on(request, "sms")),
        rungs=rungs,
        quiet_hours=quiet,
        overrides_quiet=overrides_quiet,
        opened_at=opened_at or utcnow(),
    )


def _checked_answer(request: ApprovalRequest, behavior: str, answer: str | None) -> str | None:
    """The answer to record for `behavior`, or a clear error when it does not fit the ask."""
    if request.ask == "question":
        if behavior != "answer" or not answer:
            raise RpcError(
                INVALID_PARAMS,
                f"approval {request.id} is a question: answer it with "
                f'`agentcomms answer {request.id} "LABEL or your words"` (or deny it)',
            )
        return chosen(request.options, _shown(answer, QUESTION_CHARS))
    if behavior == "answer":
        what = "a plan" if request.ask == "plan" else "a permission request"
        raise RpcError(
            INVALID_PARAMS,
            f"approval {request.id} is {what}, not a question: approve or deny it",
        )
    if behavior == "allow_session" and not request.suggestions:
        raise RpcError(
            INVALID_PARAMS,
            f"approval {request.id} offers nothing for the session; approve it without --session",
        )
    return None


def _as_reported(tool_name: str, tool_input: Any, *, trim: bool = True) -> Any:
    """The tool's input as the hook reports it after the tool ran (cut the same way); of a
    question, only the questions (the input that ran carries the answers too)."""
    if trim:
        tool_input = trimmed({"tool_input": tool_input}).get("tool_input")
    if tool_name == QUESTION_TOOL and isinstance(tool_input, dict):
        return tool_input.get("questions")
    return tool_input


def _shown(text: str, chars: int) -> str:
    return sanitize(text, max_chars=chars).text


def _summary(view: ApprovalView) -> dict[str, Any]:
    d = view.decision
    return {
        "id": view.request.id,
        "behavior": d.behavior if d else None,
        "decided_by": d.by if d else None,
        "decided_via": d.via if d else None,
        "message": d.message if d else None,
        "answer": d.answer if d else None,
    }


def _listed(view: ApprovalView) -> dict[str, Any]:
    r = view.request
    return {
        "id": r.id,
        "agent_id": r.agent_id,
        "tool": r.tool,
        "input": r.input_text,
        "ask": r.ask,
        "question": r.question,
        "options": r.options,
        "session_offered": bool(r.suggestions),
        "whole": r.whole,
        "opened_at": view.opened_at.isoformat(),
        "timeout_s": r.timeout_s,
        "on_timeout": r.on_timeout,
    }
