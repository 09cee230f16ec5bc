"""The socket methods of approvals: an agent's hook opens one and waits for its answer; the human
lists them and answers (`agentcomms approvals`, `approve`, `deny`).

The request is opened as the agent sent it, its input made safe to show and its secrets masked,
and signed with the deployment key; so is every answer the gateway records. The decision handed
to the hook is derived from the signed request and the signed answer only: an approval or an
answer someone else put into Temporal makes no hook allow anything. None of these methods is open
to an agent's own requests (:mod:`gateway.confine`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints
from temporalio.client import Client

from agentcomms.agents.hook import trimmed
from agentcomms.approval_models import ApprovalRequest, ApprovalView, Behavior, Decision
from agentcomms.bridge.fields import TmuxSocket
from agentcomms.bridge.sanitize import sanitize
from agentcomms.config import Config
from agentcomms.config.redact import mask_secrets
from agentcomms.errors import RpcError
from agentcomms.escalation_models import Escalation
from agentcomms.logs import redact
from agentcomms.models import utcnow
from agentcomms.transports import ButtonPress
from agentcomms.trust import DeploymentKey
from gateway.agent_hooks import AgentHookMethods, PaneId
from gateway.approval_chats import ApprovalChats, pressed, said
from gateway.params import AgentId, Params
from gateway.protocol import INVALID_PARAMS, NOT_FOUND
from workflows.approval.client import Approvals, WorkflowAlreadyStartedError, new_approval_id
from workflows.approval.models import Decided

log = logging.getLogger(__name__)

ApprovalId = Annotated[str, StringConstraints(pattern=r"^[2-9A-Za-z]{4}$")]
# What a person reads of a tool's input; longer is cut, visibly.
INPUT_CHARS = 4_000
ID_TRIES = 8


class ApprovalOpenParams(Params):
    kind: Literal["claude-code", "codex", "gemini"]
    agent_id: AgentId | None = None
    pane: PaneId | None = None
    tmux_socket: TmuxSocket | None = None
    tool_name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    tool_input: dict[str, Any] = Field(default_factory=dict)
    permission_suggestions: list[dict[str, Any]] = Field(default_factory=list, max_length=20)


class ApprovalWaitParams(Params):
    id: ApprovalId
    wait_s: Annotated[float, Field(gt=0, le=120)] = 25


class ApprovalDecideParams(Params):
    id: ApprovalId
    behavior: Literal["allow", "allow_session", "deny", "terminal"]
    message: Annotated[str, StringConstraints(max_length=2_000)] | None = None
    by: Annotated[str, StringConstraints(min_length=1, max_length=100)] = "the terminal's user"
    via: Literal["cli", "terminal"] = "cli"


class ApprovalsListParams(Params):
    pass


class ApprovalMethods:
    def __init__(
        self,
        cfg: Config,
        client: Client,
        key: DeploymentKey,
        hooks: AgentHookMethods,
        chats: ApprovalChats,
    ) -> None:
        self._cfg = cfg
        self._chats = chats
        self._key = key
        self._hooks = hooks
        self._approvals = Approvals(client, cfg.temporal.task_queue)
        # The approvals this gateway opened that may still be open, each with the agent, tool
        # and input (as the hook reports them) whose run or end means it was answered elsewhere.
        self._waiting: dict[str, tuple[str, str, Any]] = {}
        hooks.observers.append(self.agent_did)

    def methods(self) -> dict[str, tuple[type[Params], Callable[[Any], Awaitable[Any]]]]:
        return {
            "approval_open": (ApprovalOpenParams, self.approval_open),
            "approval_wait": (ApprovalWaitParams, self.approval_wait),
            "approval_decide": (ApprovalDecideParams, self.approval_decide),
            "approvals": (ApprovalsListParams, self.approvals),
        }

    async def approval_open(self, p: ApprovalOpenParams) -> dict[str, Any]:
        agent_id = await self._hooks.agent_of(p.agent_id, p.pane, p.tmux_socket)
        # Only what the agent offered for this session: "allow for this session" never widens
        # the agent's settings on disk.
        session = [s for s in p.permission_suggestions if s.get("destination") == "session"]
        for _ in range(ID_TRIES):
            request = self._key.sign_approval(
                ApprovalRequest(
                    id=new_approval_id(),
                    agent_id=agent_id,
                    kind=p.kind,
                    tool=_shown(p.tool_name, 200),
                    input_text=_input_text(p.tool_input),
                    suggestions=session,
                    timeout_s=self._cfg.approvals.timeout_s,
                    on_timeout=self._cfg.approval_on_timeout(agent_id),
                )
            )
            try:
                await self._approvals.open(request, self._escalation(request))
            except WorkflowAlreadyStartedError:
                continue  # a short id is taken now and then: draw another
            self._waiting[request.id] = (agent_id, p.tool_name, _as_reported(p.tool_input))
            self._chats.announce(request)
            log.info(
                "approval %s opened: agent %s asks to use %s", request.id, agent_id, p.tool_name
            )
            return {"id": request.id, "agent_id": agent_id, "timeout_s": request.timeout_s}
        raise RpcError(NOT_FOUND, "no free approval id after several tries; try again")

    def _escalation(self, request: ApprovalRequest) -> Escalation | None:
        """The agent's ladder for this request, signed; None when the config has none."""
        rungs, quiet, never_sleeps = self._cfg.escalation_for(request.agent_id)
        if not rungs:
            return None
        return self._key.sign_escalation(
            Escalation(
                subject_id=request.id,
                agent_id=request.agent_id,
                text=asks(request),
                rungs=rungs,
                quiet_hours=quiet,
                overrides_quiet=never_sleeps,
                opened_at=utcnow(),
            )
        )

    async def approval_wait(self, p: ApprovalWaitParams) -> dict[str, Any]:
        """Long-polls: `decided` with the hook's answer (None: leave it to the terminal), or
        `open` when `wait_s` passed first, for the hook to ask again."""
        view = await self._approvals.wait(p.id.upper(), p.wait_s)
        if view is None:
            return {"status": "open"}
        self._waiting.pop(view.request.id, None)
        self._chats.settle(view)
        return {"status": "decided", "decision": hook_decision(self._key, view), **_summary(view)}

    async def approval_decide(self, p: ApprovalDecideParams) -> dict[str, Any]:
        if p.behavior == "allow_session":
            view = await self._approvals.view(p.id.upper())
            if view is not None and view.open and not view.request.suggestions:
                raise RpcError(
                    INVALID_PARAMS,
                    f"approval {view.request.id} offers nothing for the session; "
                    "approve it without --session",
                )
        decided = await self._decide(
            Decision(
                approval_id=p.id.upper(),
                behavior=p.behavior,
                message=_shown(p.message, 2_000) if p.message else None,
                by=_shown(p.by, 100),
                via=p.via,
            )
        )
        if decided is None:
            raise RpcError(
                NOT_FOUND, f"no approval {p.id!r}; `agentcomms approvals` lists the open ones"
            )
        return {"accepted": decided.accepted, **_summary(decided.view)}

    async def button(self, press: ButtonPress) -> str:
        """An allowed sender pressed Allow, Allow for this session or Deny in a chat."""
        wanted = pressed(press)
        if wanted is None:
            return "This button is not agentcomms'."
        approval_id, behavior = wanted
        decided = await self._decide(
            Decision(
                approval_id=approval_id,
                behavior=behavior,
                by=_shown(press.sender_name or press.sender_id, 100),
                via=press.provider,
            )
        )
        if decided is None:
            return f"No approval {approval_id} any more."
        if decided.accepted:
            return f"{approval_id}: {said(decided.view)}"
        return f"{approval_id} was answered already: {said(decided.view)}"

    async def by_call(self, approval_id: str, behavior: Behavior, by: str) -> Decided | None:
        """Answered on the phone (a key or a word): decided like any other answer."""
        return await self._decide(
            Decision(approval_id=approval_id, behavior=behavior, by=by, via="call")
        )

    async def _decide(self, decision: Decision) -> Decided | None:
        """Sign the answer and give it to the approval; the chats hear how it was decided."""
        decided = await self._approvals.decide(self._key.sign_decision(decision))
        self._waiting.pop(decision.approval_id, None)
        if decided is not None and decided.view.decision is not None:
            self._chats.settle(decided.view)
        return decided

    async def agent_did(self, agent_id: str, event: str, payload: dict[str, Any]) -> None:
        """Answered in the agent's own dialog, Claude leaves the hook waiting: the tool's run
        (or failure) says so, and a turn's end or the session's leaves nothing to ask."""
        if event in ("PostToolUse", "PostToolUseFailure"):
            done = (agent_id, payload.get("tool_name"), payload.get("tool_input"))
            answered = [i for i, w in self._waiting.items() if w == done]
        elif event in ("Stop", "StopFailure", "SessionEnd"):
            answered = [i for i, w in self._waiting.items() if w[0] == agent_id]
        else:
            return
        for approval_id in answered:
            self._waiting.pop(approval_id, None)
            decision = Decision(
                approval_id=approval_id, behavior="terminal", by="the terminal", via="terminal"
            )
            try:
                await self._decide(decision)
            except Exception:
                log.exception("approval %s: could not close it as answered", approval_id)

    async def approvals(self, p: ApprovalsListParams) -> dict[str, Any]:
        views = []
        for approval_id in await self._approvals.open_ids():
            view = await self._approvals.view(approval_id)
            if view is not None and view.open:
                views.append(_listed(view))
        views.sort(key=lambda v: v["opened_at"])
        return {"approvals": views}


def hook_decision(key: DeploymentKey, view: ApprovalView) -> dict[str, Any] | None:
    """What the agent's hook answers, in Claude Code's `decision` shape; None leaves the
    agent's own dialog to the terminal. Nothing unsigned decides."""
    request, decision = view.request, view.decision
    if decision is None or not key.approval_is_genuine(request):
        return None
    if decision.behavior == "timeout":
        if request.on_timeout != "deny":
            return None
        return {
            "behavior": "deny",
            "message": f"No one answered this permission request within "
            f"{request.timeout_s:g} s, so it was denied. Go on without it, or ask again later.",
        }
    if not key.decision_is_genuine(decision):
        log.warning("approval %s: an answer without the deployment's tag, ignored", request.id)
        return None
    if decision.behavior == "allow":
        return {"behavior": "allow"}
    if decision.behavior == "allow_session":
        return {"behavior": "allow", "updatedPermissions": request.suggestions}
    if decision.behavior == "deny":
        return {
            "behavior": "deny",
            "message": decision.message or f"Denied by {decision.by}.",
        }
    return None  # answered in the terminal


def asks(request: ApprovalRequest) -> str:
    """What the agent wants, as a person hears it: "backend asks to run: rm -rf build"."""
    if request.tool == "Bash":
        return f"{request.agent_id} asks to run: {request.input_text}"
    return f"{request.agent_id} asks to use {request.tool}: {request.input_text}"


def _as_reported(tool_input: dict[str, Any]) -> Any:
    """The tool's input as the hook reports it after the tool ran (cut the same way)."""
    return trimmed({"tool_input": tool_input}).get("tool_input")


def _shown(text: str, chars: int) -> str:
    return sanitize(text, max_chars=chars).text


def _input_text(tool_input: dict[str, Any]) -> str:
    """A Bash command as its command line; any other input as its JSON."""
    command = tool_input.get("command")
    if isinstance(command, str) and set(tool_input) <= {"command", "description", "timeout"}:
        text = command
    else:
        text = json.dumps(tool_input, ensure_ascii=False, sort_keys=True)
    return _shown(redact(mask_secrets(text)), INPUT_CHARS)


def _summary(view: ApprovalView) -> dict[str, Any]:
    d = view.decision
    return {
        "id": view.request.id,
        "behavior": d.behavior if d else None,
        "decided_by": d.by if d else None,
        "decided_via": d.via if d else None,
        "message": d.message if d else None,
    }


def _listed(view: ApprovalView) -> dict[str, Any]:
    r = view.request
    return {
        "id": r.id,
        "agent_id": r.agent_id,
        "tool": r.tool,
        "input": r.input_text,
        "session_offered": bool(r.suggestions),
        "opened_at": view.opened_at.isoformat(),
        "timeout_s": r.timeout_s,
        "on_timeout": r.on_timeout,
    }
