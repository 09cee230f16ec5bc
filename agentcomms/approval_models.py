"""What an approval holds and how it was answered: the gateway, the workflow and the deployment key
(:mod:`agentcomms.trust`) share these, so they live in the core and pass through the sandbox."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

# allow: this once; allow_session: and what the agent offered for the rest of its session;
# deny: with the human's message to the model; terminal: answered in the agent's own dialog;
# timeout: no answer in time (then the request's on_timeout says what the hook does);
# answer: a question answered, with the chosen label or the human's own words.
Behavior = Literal["allow", "allow_session", "deny", "terminal", "timeout", "answer"]
# A "terminal" decision's message when the agent dropped the call in its pane (Gemini CLI's Esc):
# nobody answered it there, the call is gone. The hook (standard library only) spells it too.
CANCELED_IN_TERMINAL = "canceled in the terminal"
OnTimeout = Literal["terminal", "deny"]
# permission: may the agent use a tool; question: the agent asks the human something (Claude
# Code's AskUserQuestion), with options to choose from; plan: may the agent stop planning and
# carry out its plan (ExitPlanMode).
Ask = Literal["permission", "question", "plan"]


class ApprovalRequest(BaseModel):
    """One permission request of an agent, as the gateway opened it (and signed it)."""

    id: str  # short, for a person to type: K7QF
    agent_id: str
    kind: str = "claude-code"
    tool: str
    # The tool's input as the agent sent it, shown visibly (nothing deleted or masked: every
    # control, escape, bidi or zero-width character as a mark, `agentcomms.visible`).
    input_text: str
    # False: the input (or the question, or the plan) was too long to keep, and is cut, visibly;
    # only the agent's own dialog shows it whole, so only there can it be allowed.
    whole: bool = True
    # What the agent offered for "allow for this session" (Claude's permission_suggestions).
    suggestions: list[dict[str, Any]] = Field(default_factory=list)
    timeout_s: float
    on_timeout: OnTimeout = "terminal"
    ask: Ask = "permission"
    question: str | None = None  # a question's text, or the plan's text
    options: list[str] = Field(default_factory=list)  # a question's option labels
    multi: bool = False  # a question that takes several of its options
    # Drawn afresh for each request when it is signed: two requests that happen to draw the same
    # short id, for the same command, are still two requests, and an answer binds to one.
    nonce: str = ""
    signature: str | None = None


class Decision(BaseModel):
    """One answer to an approval: what, by whom, through what surface (signed by the gateway)."""

    approval_id: str
    behavior: Behavior
    message: str | None = None  # a denial's reason, which the model reads word for word
    answer: str | None = None  # a question's answer: the chosen label(s), or the human's words
    by: str  # who answered: the terminal's user, "the terminal", "agentcomms"
    via: str  # where: "cli", "terminal", "timeout"
    # The request it answers: the digest of that request's signed content
    # (`agentcomms.trust.request_digest`), so that an answer copied from an old run of the same
    # short id answers nothing else. None only for a timeout, which the workflow records.
    answers: str | None = None
    at: datetime | None = None  # set by the workflow when it took the answer
    signature: str | None = None


class DecisionCheck(BaseModel):
    """An answer given to an approval, to be checked against the deployment's tag."""

    request: ApprovalRequest
    decision: Decision


class ApprovalView(BaseModel):
    """An approval as everyone reads it: the request, its answer once there is one, and every
    answer tried (the later ones were told it was decided already)."""

    request: ApprovalRequest
    opened_at: datetime
    decision: Decision | None = None
    history: list[Decision] = Field(default_factory=list)

    @property
    def open(self) -> bool:
        return self.decision is None


def chosen(options: list[str], text: str) -> str:
    """What a person's answer to a question stands for: an option's label when the text names
    one (its words in any case, or its number), several labels joined by ", " when each
    comma-separated part names one (how Claude Code reads a multi-select answer), else the
    text itself as the person's own answer ("Other")."""
    words = text.strip()

    def label(part: str) -> str | None:
        part = part.strip()
        if part.isdigit() and 1 <= int(part) <= len(options):
            return options[int(part) - 1]
        return next((o for o in options if o.casefold() == part.casefold()), None)

    whole = label(words)
    if whole is not None:
        return whole
    parts = [label(p) for p in words.split(",")]
    if len(parts) > 1 and all(p is not None for p in parts):
        return ", ".join(dict.fromkeys(p for p in parts if p is not None))
    return words
