"""What people read of an approval in a chat, and what they answer with.

Chats with buttons (Telegram, Discord) get Allow, Allow for this session (where the agent
offered it) and Deny; a press sends back ``ap:K7QF:a`` (allow), ``s`` (for the session) or ``d``
(deny). Chats of plain text (SMS, WhatsApp) get a code to reply with: "Reply YES K7QF or NO
K7QF", ``ALWAYS K7QF`` for the session where offered, and ``NO K7QF`` followed by words that
the agent reads as the reason. Replies are read in any case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentcomms.approval_models import ApprovalRequest, ApprovalView, Behavior

BUTTON_PREFIX = "ap"
BUTTON_BEHAVIOR: dict[str, Behavior] = {"a": "allow", "s": "allow_session", "d": "deny"}
# Where an answer came from, as people name it ("allowed by Alice on Telegram").
SURFACE_NAMES = {
    "telegram": "Telegram",
    "discord": "Discord",
    "sms": "SMS",
    "whatsapp": "WhatsApp",
    "console": "the console",
    "call": "a phone call",
}
HOW = {"allow": "allowed", "allow_session": "allowed for the session", "deny": "denied"}
CODE_WORDS: dict[str, Behavior] = {"yes": "allow", "always": "allow_session", "no": "deny"}
# An approval id as typed back: four of its letters and digits (no 0/O, 1/I), any case.
_CODED = re.compile(
    r"\s*(yes|no|always)\s+([2-9a-hj-np-z]{4})(?![0-9a-z])[\s.,:;!-]*(.*)",
    re.IGNORECASE | re.DOTALL,
)
# The longest reason a denial by code carries (the agent reads it word for word).
REASON_CHARS = 2_000


def buttons(request: ApprovalRequest) -> list[tuple[str, str]]:
    """The request's buttons, each (label, what a press sends back)."""
    row = [("Allow", f"{BUTTON_PREFIX}:{request.id}:a")]
    if request.suggestions:
        row.append(("Allow for this session", f"{BUTTON_PREFIX}:{request.id}:s"))
    row.append(("Deny", f"{BUTTON_PREFIX}:{request.id}:d"))
    return row


def pressed(data: str) -> tuple[str, Behavior] | None:
    """(approval id, behavior) a button's data stands for; None for any other button."""
    prefix, _, rest = data.partition(":")
    approval_id, _, short = rest.partition(":")
    if prefix != BUTTON_PREFIX or short not in BUTTON_BEHAVIOR or len(approval_id) != 4:
        return None
    return approval_id.upper(), BUTTON_BEHAVIOR[short]


@dataclass(frozen=True)
class CodedAnswer:
    """A reply carrying an approval's code: "YES K7QF", "ALWAYS K7QF", "NO K7QF not now"."""

    approval_id: str
    behavior: Behavior
    reason: str | None  # a denial's words after the code
    typed_as_code: bool  # the code in capitals or with a digit, as the request spelled it


def coded(text: str) -> CodedAnswer | None:
    """The answer a reply carries, when it starts with YES, NO or ALWAYS and a code."""
    found = _CODED.fullmatch(text)
    if found is None:
        return None
    word, code, rest = found[1].lower(), found[2], found[3].strip()
    behavior = CODE_WORDS[word]
    reason = rest[:REASON_CHARS] if behavior == "deny" and rest else None
    return CodedAnswer(
        approval_id=code.upper(),
        behavior=behavior,
        reason=reason,
        typed_as_code=code.isupper() or any(c.isdigit() for c in code),
    )


def refused_answer(approval_id: str) -> str:
    """What someone who may not answer an approval is told."""
    return f"Only the agent's approvers may answer {approval_id}: nothing changed."


def reply_with(request: ApprovalRequest) -> str:
    """How to answer by text."""
    line = f"Reply YES {request.id} or NO {request.id}"
    if request.suggestions:
        line += f" (ALWAYS {request.id}: allow for the rest of this session)"
    return line + f". NO {request.id} followed by words tells the agent why."


def asks(request: ApprovalRequest, *, input_chars: int | None = None) -> str:
    """The request's first lines: who asks to use what, with its input (cut, visibly)."""
    shown = request.input_text
    if input_chars is not None and len(shown) > input_chars:
        shown = shown[: max(input_chars - 1, 0)] + "…"
    return f"{request.agent_id} asks to use {request.tool}:\n{shown}"


def said(view: ApprovalView) -> str:
    """How it was decided, for people: "allowed by Alice on Telegram"."""
    d = view.decision
    if d is None:
        return "still open"
    if d.behavior == "terminal":
        return "answered in the terminal"
    if d.behavior == "timeout":
        on = view.request.on_timeout
        return "no answer in time: " + ("denied" if on == "deny" else "left to the terminal")
    how = HOW.get(d.behavior, d.behavior)
    return f"{how} by {d.by} on {SURFACE_NAMES.get(d.via, d.via)}"


def settled(view: ApprovalView) -> str:
    """A request's message once decided (its buttons gone)."""
    r = view.request
    return f"{r.agent_id} asked to use {r.tool}:\n{r.input_text}\n\n{r.id}: {said(view)}"


def outcome(view: ApprovalView) -> str:
    """What a chat of plain text is told once it is decided: one short line."""
    r = view.request
    return f"{r.id} ({r.agent_id}, {r.tool}): {said(view)}"
