"""An agent's state, from its own hooks: ready, busy, waiting (on what), offline, unknown.

Plain Python and pass-through models: the mailbox carries :class:`Readiness` through
continue-as-new and applies each :class:`HookReport` with :func:`apply`; unit tests reach the rules
in milliseconds.

Hooks do not arrive in order. Claude Code runs ``PreToolUse`` and ``PermissionRequest`` hooks
concurrently, ``async`` hooks finish whenever they finish, and an old session's late hook can
come after a new session began. Each report therefore carries ``at_ns``, the hook's own clock
when it started (its agent runs its hooks in event order), and a report older than the last one
applied changes nothing.

Hooks do not tell everything either: Claude Code sends none on Esc, and its first-start dialog is
open while ``SessionStart`` fires. So a state that hooks last set long ago is not trusted alone:
after :data:`STALE_AFTER` the pane itself decides (:mod:`agentcomms.bridge.tmux` reads it).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel

AgentKind = Literal["claude-code", "codex", "gemini"]
KINDS: tuple[str, ...] = ("claude-code", "codex", "gemini")
State = Literal["ready", "busy", "waiting", "offline", "unknown"]
DeliverMode = Literal["when-ready", "now"]

# Past this long without a hook, a busy or waiting state may be wrong (Esc sends no hook): the
# pane is read to decide, and a message is typed if it shows the agent at its prompt.
STALE_AFTER = timedelta(seconds=10)
# What a report keeps of the agent's payload: enough to say what it waits for, never its files.
SUMMARY_CHARS = 160
PROMPT_CHARS = 4_000
# Messages typed and not yet carried by a UserPromptSubmit, and those that were: remembered so a
# waiting `send --wait` can tell "submitted" (the agent took the prompt) from merely typed.
AWAITING_KEPT = 100
SUBMITTED_KEPT = 500
# How much of a message's text is looked for in the agent's prompt.
NEEDLE_CHARS = 120
# A typed prompt no UserPromptSubmit carried after this long: the pane's input box is read.
FOLLOW_UP_AFTER = timedelta(seconds=3)


class HookReport(BaseModel):
    """One hook of one agent, reduced to what the state needs."""

    kind: str
    event: str
    at_ns: int
    session_id: str | None = None
    tool: str | None = None
    summary: str | None = None  # a short summary of the tool input, question or notification
    prompt: str | None = None  # the human's text, for UserPromptSubmit
    # The deployment's tag (the gateway signs what the agent's hooks said): anyone can signal a
    # mailbox, and a forged "ready" would have messages typed into a dialog.
    signature: str | None = None


class FollowUp(BaseModel):
    """The prompt typed last, to be looked for in the input box if no hook carries it."""

    ids: list[str]
    at: datetime  # when to look
    at_ns: int  # the order of the state when it was typed: a hook since has a later one
    pressed: bool = False  # Enter was pressed once more: the next look only judges


class Readiness(BaseModel):
    """An agent's state as the mailbox carries it."""

    state: State = "unknown"
    waiting_for: str | None = None  # "permission for Bash: ls", "a question: Which colour?"…
    since: datetime | None = None  # when the state became what it is
    event: str | None = None  # the hook (or the mailbox's own step) that set it
    session_id: str | None = None
    at_ns: int = 0  # the order of the last report applied
    reported_at: datetime | None = None  # when the last report was applied
    awaiting: dict[str, str] = {}  # event id -> its text's start, typed, not yet submitted
    submitted: list[str] = []  # event ids a UserPromptSubmit carried, newest last
    # The last prompt a hook carried that no typed message awaited: an agent can take a prompt
    # (Gemini CLI's BeforeAgent, measured) before the mailbox has recorded typing it.
    unclaimed: str | None = None
    pane: str | None = None  # why the pane's last look found it not ready (cleared when typed)
    follow_up: FollowUp | None = None
    # A typed prompt left the input box and no hook carried it: the hooks do not report (the
    # state is unknown until one does).
    hooks_missing: bool = False

    def describe(self) -> str:
        """`busy`, `waiting (permission for Bash: ls)`…: what people read."""
        if self.state == "waiting" and self.waiting_for:
            return f"waiting ({self.waiting_for})"
        return self.state


def apply(current: Readiness, report: HookReport, now: datetime) -> Readiness | None:
    """The state after `report`, or None when it changes nothing: older than the last report
    applied, or an event that says nothing of the state."""
    if report.at_ns <= current.at_ns:
        return _named_late(current, report) or _carried_late(current, report)
    step = _step(report)
    if step is None:
        return None
    state, waiting_for = step
    if state == "waiting" and waiting_for is None and current.state == "waiting":
        waiting_for = current.waiting_for  # a late notification of the dialog already known
    if state == "waiting" and waiting_for is None:
        waiting_for = PERMISSION_PROMPT
    awaiting, submitted, unclaimed = current.awaiting, current.submitted, current.unclaimed
    if report.prompt:
        prompt = " ".join(report.prompt.split())
        carried = [i for i, needle in awaiting.items() if needle in prompt]
        awaiting = {i: n for i, n in awaiting.items() if i not in carried}
        submitted = [*submitted, *carried][-SUBMITTED_KEPT:]
        unclaimed = None if carried else prompt
    same = state == current.state and waiting_for == current.waiting_for
    return current.model_copy(
        update={
            "state": state,
            "waiting_for": waiting_for if state == "waiting" else None,
            "since": current.since if same and current.since else now,
            "event": report.event,
            "session_id": report.session_id or current.session_id,
            "at_ns": report.at_ns,
            "reported_at": now,
            "awaiting": awaiting,
            "submitted": submitted,
            "unclaimed": unclaimed,
            "hooks_missing": False,
        }
    )


def beside_its_turn(current: Readiness, report: HookReport) -> bool:
    """Whether `report` is one of Codex's that says nothing of the agent's turn, though the
    state would take it as news:

    - the SessionStart for the session whose prompt already made the agent busy: Codex starts
      its session at the first prompt and runs both hooks at once, in the background, so the
      SessionStart may be stamped after the prompt (measured: by 2 to 9 ms on a loaded
      machine);
    - a ``notify`` of a thread other than the session its hooks named (or before they named
      one): Codex writes the task's title in a thread of its own as the first prompt starts,
      and notifies that turn's end too (measured: 120 to 160 ms after the prompt). The
      session's own Stop hook tells its turn's end.

    Either, read as "ready", would have a message typed into the running turn."""
    if report.kind != "codex":
        return False
    if report.event == "agent-turn-complete":
        return current.session_id is None or report.session_id != current.session_id
    return (
        report.event == "SessionStart"
        and report.session_id is not None
        and report.session_id == current.session_id
        and current.state in ("busy", "waiting")
    )


def _named_late(current: Readiness, report: HookReport) -> Readiness | None:
    """A PermissionRequest that started before the dialog's Notification but reached the
    mailbox after it (its hook, which waits for the human's answer, is slower to report) still
    names what the dialog asks, where the Notification only said that one is open."""
    if report.event != "PermissionRequest" or current.state != "waiting":
        return None
    if current.waiting_for != PERMISSION_PROMPT:
        return None
    return current.model_copy(update={"waiting_for": _waiting_for(report.tool, report.summary)})


def _carried_late(current: Readiness, report: HookReport) -> Readiness | None:
    """A prompt older than the state still tells which typed messages it carried: the mailbox
    records its typing once the keys are sent, and the agent may take the prompt (its hook's
    clock) before that; the state itself stays."""
    if not report.prompt:
        return None
    prompt = " ".join(report.prompt.split())
    carried = [i for i, needle in current.awaiting.items() if needle in prompt]
    if not carried:
        return None
    return current.model_copy(
        update={
            "awaiting": {i: n for i, n in current.awaiting.items() if i not in carried},
            "submitted": [*current.submitted, *carried][-SUBMITTED_KEPT:],
        }
    )


def typed(current: Readiness, now: datetime, texts: dict[str, str] | None = None) -> Readiness:
    """The state once the mailbox typed a prompt (`texts`: event id -> text): busy until the
    agent's hooks say otherwise (its UserPromptSubmit takes a moment), so the next message waits
    for this turn to end; each text awaits the UserPromptSubmit that carries it."""
    if current.state == "unknown":
        return current
    at_ns = max(current.at_ns, int(now.timestamp() * 1_000_000_000))
    awaiting = dict(current.awaiting)
    carried: list[str] = []
    for event_id, text in (texts or {}).items():
        if needle := " ".join(text.split())[:NEEDLE_CHARS]:
            if current.unclaimed is not None and needle in current.unclaimed:
                carried.append(event_id)  # the agent took the prompt before this was recorded
            else:
                awaiting[event_id] = needle
    return current.model_copy(
        update={
            "awaiting": dict(list(awaiting.items())[-AWAITING_KEPT:]),
            "submitted": [*current.submitted, *carried][-SUBMITTED_KEPT:],
            "unclaimed": None if carried else current.unclaimed,
            "state": "busy",
            "waiting_for": None,
            "since": now,
            "event": "typed",
            "at_ns": at_ns,
            # Hooks missing or a prompt never submitted: the pane is looked at in STALE_AFTER.
            "reported_at": now,
            "follow_up": FollowUp(ids=list(texts or {}), at=now + FOLLOW_UP_AFTER, at_ns=at_ns)
            if texts
            else current.follow_up,
        }
    )


def to_follow_up(current: Readiness) -> list[str]:
    """The messages of the prompt typed last that no UserPromptSubmit carried yet."""
    follow_up = current.follow_up
    return [i for i in follow_up.ids if i in current.awaiting] if follow_up else []


def looked(current: Readiness, in_box: bool, pressed: bool, now: datetime) -> Readiness:
    """The state once the mailbox read the input box of a prompt no hook carried: Enter pressed
    once more is looked at again; text gone with no hook since means the hooks are missing."""
    follow_up = current.follow_up
    assert follow_up is not None
    if pressed:
        again = follow_up.model_copy(update={"pressed": True, "at": now + FOLLOW_UP_AFTER})
        return current.model_copy(update={"follow_up": again})
    update: dict[str, Any] = {"follow_up": None}
    if in_box:
        update["pane"] = "the typed text stays in the agent's input box, not submitted"
    elif current.at_ns == follow_up.at_ns:
        # Gone, and not a word from the hooks since: they do not report. The pane alone decides
        # from now on, and the next hook makes the state known again.
        gone = set(follow_up.ids)
        update |= {
            "state": "unknown",
            "waiting_for": None,
            "since": now,
            "event": "follow-up",
            "hooks_missing": True,
            "awaiting": {i: n for i, n in current.awaiting.items() if i not in gone},
        }
    return current.model_copy(update=update)


def may_type(current: Readiness, now: datetime, mode: DeliverMode) -> bool:
    """Whether the mailbox may try to type now; the pane's own look has the last word."""
    if mode == "now" or current.state in ("ready", "unknown"):
        return True
    return stale_in(current, now) <= timedelta(0)


def stale_in(current: Readiness, now: datetime) -> timedelta:
    """How long until the last report is old enough for the pane to decide."""
    last = current.reported_at or current.since
    if last is None:
        return timedelta(0)
    return last + STALE_AFTER - now


def submitted(current: Readiness, event_id: str) -> bool | None:
    """Whether the agent's UserPromptSubmit carried the message: None when that cannot be known
    (the agent's hooks do not report, or the message was not typed while they did)."""
    if event_id in current.submitted:
        return True
    return False if event_id in current.awaiting else None


# ---- what each agent's hooks mean ------------------------------------------------------------

Step = tuple[State, str | None]
_BUSY: Step = ("busy", None)
_READY: Step = ("ready", None)
_OFFLINE: Step = ("offline", None)

# Claude Code, and the Codex hooks that share its names.
_CLAUDE: dict[str, Step] = {
    "SessionStart": _READY,
    "UserPromptSubmit": _BUSY,
    "PreToolUse": _BUSY,
    "PostToolUse": _BUSY,
    "PostToolUseFailure": _BUSY,
    "PreCompact": _BUSY,
    "Stop": _READY,
    "StopFailure": _READY,
    "SessionEnd": _OFFLINE,
    # Codex
    "Interrupt": _READY,
    "agent-turn-complete": _READY,  # its `notify`
}
# Not one of Gemini CLI's hooks: its asking hook (remote approvals) read Esc's "Request
# cancelled." in the session's transcript. Esc ends the turn and Gemini is back at its prompt,
# but sends no hook of its own until the next prompt (agentcomms.agents.hook_approval).
GEMINI_CANCELLED_EVENT = "GeminiCancelled"
_GEMINI: dict[str, Step] = {
    "SessionStart": _READY,
    "BeforeAgent": _BUSY,
    "BeforeModel": _BUSY,
    "BeforeTool": _BUSY,
    "AfterTool": _BUSY,
    "PreCompress": _BUSY,
    "AfterAgent": _READY,
    "SessionEnd": _OFFLINE,
    GEMINI_CANCELLED_EVENT: _READY,
}
# A process agent's runner (agentcomms.acp.runner) reports what the ACP stream says, exactly.
_ACP: dict[str, Step] = {
    "SessionStart": _READY,
    "TurnStart": _BUSY,
    "PermissionAnswered": _BUSY,
    "TurnEnd": _READY,
    "SessionEnd": _OFFLINE,
}
_NOTIFICATIONS: dict[str, Step] = {
    "permission_prompt": ("waiting", None),
    "elicitation_dialog": ("waiting", "a dialog"),
    "idle_prompt": _READY,
    "ToolPermission": ("waiting", None),  # Gemini CLI
}


# The hooks that carry the human's prompt as the agent took it: Claude Code's and Codex's
# UserPromptSubmit, Gemini CLI's BeforeAgent, a process agent's prompt sent.
PROMPT_SUBMITTED = ("UserPromptSubmit", "BeforeAgent", "TurnStart")

# What the state waits for when a notification said only that a permission dialog is open.
PERMISSION_PROMPT = "a permission prompt"

# Not a hook: the gateway's look at a pane as it is registered found the agent at its prompt.
AT_PROMPT = "registered-at-prompt"


def _step(report: HookReport) -> tuple[State, str | None] | None:
    if report.event == AT_PROMPT:
        return _READY
    if report.event == "PermissionRequest":
        return ("waiting", _waiting_for(report.tool, report.summary))
    if report.event == "Notification":
        return _NOTIFICATIONS.get(report.summary or "")
    table = {"gemini": _GEMINI, "acp": _ACP}.get(report.kind, _CLAUDE)
    return table.get(report.event)


def _waiting_for(tool: str | None, summary: str | None) -> str:
    if tool == "AskUserQuestion":
        return f"a question: {summary}" if summary else "a question"
    if tool == "ExitPlanMode":
        return "plan approval"
    what = f"permission for {tool or 'a tool'}"
    return f"{what}: {summary}" if summary else what


# ---- reducing an agent's payload --------------------------------------------------------------


def report_from(
    kind: str, event: str, at_ns: int, session_id: str | None, payload: dict[str, Any]
) -> HookReport:
    """The report of a hook's payload: the tool, a short summary, the prompt; nothing else."""
    tool = _text(payload.get("tool_name"), 64)
    summary: str | None = None
    if event == "Notification":
        summary = _text(payload.get("notification_type"), 64)
    elif tool is not None:
        summary = _tool_summary(tool, payload.get("tool_input"))
    submitted = event in PROMPT_SUBMITTED
    prompt = _text(payload.get("prompt"), PROMPT_CHARS) if submitted else None
    return HookReport(
        kind=kind,
        event=event[:64],
        at_ns=at_ns,
        # Codex's notify names its thread where its hooks name the session.
        session_id=_text(session_id or payload.get("session_id") or payload.get("thread-id"), 128),
        tool=tool,
        summary=summary,
        prompt=prompt,
    )


def _tool_summary(tool: str, tool_input: Any) -> str | None:
    if not isinstance(tool_input, dict):
        return _text(tool_input, SUMMARY_CHARS)
    if tool == "AskUserQuestion":
        questions = tool_input.get("questions")
        if isinstance(questions, list) and questions and isinstance(questions[0], dict):
            return _text(questions[0].get("question"), SUMMARY_CHARS)
        return None
    for key in ("command", "file_path", "path", "url", "pattern", "description"):
        if key in tool_input:
            return _text(tool_input[key], SUMMARY_CHARS)
    first = next((v for v in tool_input.values() if isinstance(v, str)), None)
    return _text(first, SUMMARY_CHARS)


def _text(value: Any, limit: int) -> str | None:
    """A string shortened to `limit`, control characters turned to spaces; None if not text."""
    if not isinstance(value, str) or not value:
        return None
    clean = "".join(c if c.isprintable() or c == "\n" else " " for c in value)
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"
