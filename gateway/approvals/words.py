"""What people read of an approval in a chat, and what they answer with.

Chats with buttons (Telegram, Discord, Slack) get Allow, Allow for this session (where the agent
offered it) and Deny; a press sends back ``ap:K7QF:a`` (allow), ``s`` (for the session) or ``d``
(deny), followed by the start of the request's digest (``ap:K7QF:a:Xy3…``), so a button left
under an earlier request that drew the same id answers nothing of this one. A question gets one button per option (``o1`` … ``o4``: answer with that option), a
plan Approve (``a``) and Keep planning (``d``). A question that takes several options gets a
box per option that a press ticks or unticks (``t2`` ticks option 2, ``u2`` unticks it: a ticked
box's data says so) and Done (``done``: answer with the ticked ones). The ticks live in the
message's own buttons, which the provider sends back with each press, so a selection half made
outlives a gateway restart.

Chats of plain text (SMS, WhatsApp, IRC) get a code to reply with: "Reply YES K7QF or NO K7QF",
``ALWAYS K7QF`` for the session where offered, and ``NO K7QF`` followed by words that the agent
reads as the reason. Replies are read in any case.

On a phone (a ladder's call, a call coming in, the local phone) the request is one sentence
(``asks(…, spoken=True)``) and its :func:`keys`: 1 allow and 2 deny, a plan's 1 approve and 2 keep
planning, a question's options a digit each (several keyed then #, for a question that takes
several); a word said is heard as its key, or an option's label (:func:`heard_on_phone`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agentcomms.approval_models import ApprovalRequest, ApprovalView, Behavior
from agentcomms.approval_outcome import how_decided
from agentcomms.config.redact import mask_secrets
from agentcomms.transports import abilities, is_provider
from agentcomms.trust import request_digest

BUTTON_PREFIX = "ap"
# Of the digest of the request a button was shown under, what its data carries (Telegram keeps
# 64 bytes of it): a press binds to that request, as every answer does.
BINDING_CHARS = 12
BUTTON_BEHAVIOR: dict[str, Behavior] = {"a": "allow", "s": "allow_session", "d": "deny"}
OPTION_BUTTON = "o"
TICK_BUTTON = "t"
UNTICK_BUTTON = "u"
DONE_BUTTON = "done"
TICKED, UNTICKED = "☑", "☐"
# What a request is called where only its first part is shown.
ASKED = {"permission": "request", "question": "question", "plan": "plan"}
# Of a question's answer in words, what a chat's "answered … by" line repeats.
ANSWER_SHOWN = 200
# A plan read out on a call is cut here (the terminal and the console show it whole).
PLAN_SPOKEN_CHARS = 1_000
# What a text message (SMS, WhatsApp) shows of a request before saying where the rest is.
TEXT_REQUEST_CHARS = 600
# What a push notification (ntfy) shows of a request: it takes 4,096 bytes, and a request longer
# than this is answered where it is shown whole.
PUSH_REQUEST_CHARS = 800
HIDDEN_SECRET = "[hidden here: looks like a secret]"
WHERE_WHOLE = "`agentcomms approvals` in a terminal, or the console"
# Answers that let the agent go on as asked; a denial never runs anything, so it is taken
# from wherever the request was shown, whole or not.
LETTING = frozenset({"allow", "allow_session", "answer"})
# A question's options take the keys from 1 (four at most): this one says it again, or skips.
QUESTION_AGAIN_KEY = "9"
# A key, or the word for it, as a person says it on a call (a permission or a plan).
PHONE_WORDS: dict[str, Behavior] = {
    "1": "allow",
    "one": "allow",
    "allow": "allow",
    "approve": "allow",
    "yes": "allow",
    "2": "deny",
    "two": "deny",
    "deny": "deny",
    "no": "deny",
}
NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
}
# Where an answer came from, as people name it ("allowed by Alice on Telegram").
SURFACE_NAMES = {
    "telegram": "Telegram",
    "discord": "Discord",
    "slack": "Slack",
    "sms": "SMS",
    "whatsapp": "WhatsApp",
    "ntfy": "a push notification",
    "irc": "IRC",
    "email": "email",
    "console": "the console",
    "call": "a phone call",
    # `agentcomms approve`, and the hook's own answer from the agent's terminal.
    "cli": "the command line",
    "terminal": "the terminal",
}
CODE_WORDS: dict[str, Behavior] = {
    "yes": "allow",
    "always": "allow_session",
    "no": "deny",
    "answer": "answer",  # a question's: option numbers or labels (comma-separated), or words
}
# An approval id as typed back: four of its letters and digits (no 0/O, 1/I), any case.
_CODED = re.compile(
    r"\s*(yes|no|always|answer)\s+([2-9a-hj-np-z]{4})(?![0-9a-z])[\s.,:;!-]*(.*)",
    re.IGNORECASE | re.DOTALL,
)
# The longest reason a denial by code carries (the agent reads it word for word).
REASON_CHARS = 2_000


def buttons(
    request: ApprovalRequest, ticked: frozenset[int] = frozenset()
) -> list[tuple[str, str]]:
    """The request's buttons, each (label, what a press sends back); a question that takes
    several options shows the options `ticked` (their numbers) as ticked."""

    bound = binding(request)

    def data(short: str) -> str:
        return f"{BUTTON_PREFIX}:{request.id}:{short}:{bound}"

    if request.ask == "question" and request.multi:
        boxes = [
            (f"{TICKED} {o}", data(f"{UNTICK_BUTTON}{n}"))
            if n in ticked
            else (f"{UNTICKED} {o}", data(f"{TICK_BUTTON}{n}"))
            for n, o in enumerate(request.options, 1)
        ]
        return [*boxes, ("Done", data(DONE_BUTTON))]
    if request.ask == "question":
        return [(o, data(f"{OPTION_BUTTON}{n}")) for n, o in enumerate(request.options, 1)]
    if request.ask == "plan":
        return [("Approve", data("a")), ("Keep planning", data("d"))]
    row = [("Allow", data("a"))]
    if request.suggestions:
        row.append(("Allow for this session", data("s")))
    row.append(("Deny", data("d")))
    return row


def _parts(data: str) -> tuple[str, str, str, str]:
    """A button's data: (prefix, approval id, what it does, the request it was shown for)."""
    prefix, _, rest = data.partition(":")
    approval_id, _, rest = rest.partition(":")
    short, _, bound = rest.partition(":")
    return prefix, approval_id, short, bound


def shown_for(data: str, request: ApprovalRequest) -> bool:
    """Whether a pressed button may answer `request`: not one shown under an earlier request
    that drew the same short id (its buttons left in a chat), whose press answers nothing here.
    Data that names no request (made by hand) is the presser's answer to the request as it is."""
    bound = _parts(data)[3]
    return not bound or bound == binding(request)


def binding(request: ApprovalRequest) -> str:
    """What a button or a form carries of the request it was shown for: the start of its digest,
    which no other request shares (another of the same short id has a nonce of its own)."""
    return request_digest(request)[:BINDING_CHARS]


def chosen_option(data: str) -> tuple[str, int] | None:
    """(approval id, option number) a question's option button stands for; None otherwise."""
    prefix, approval_id, short, _ = _parts(data)
    number = short.removeprefix(OPTION_BUTTON)
    if prefix != BUTTON_PREFIX or not short.startswith(OPTION_BUTTON) or not number.isdigit():
        return None
    return (approval_id.upper(), int(number)) if len(approval_id) == 4 else None


@dataclass(frozen=True)
class Tick:
    """A press on a box of a question that takes several options: tick (or untick) `option`,
    or, `option` None, Done."""

    approval_id: str
    option: int | None
    ticks: bool = False


def ticking(data: str) -> Tick | None:
    """The tick, untick or Done a button's data stands for; None for any other button."""
    prefix, approval_id, short, _ = _parts(data)
    if prefix != BUTTON_PREFIX or len(approval_id) != 4:
        return None
    if short == DONE_BUTTON:
        return Tick(approval_id.upper(), None)
    kind, number = short[:1], short[1:]
    if kind not in (TICK_BUTTON, UNTICK_BUTTON) or not number.isdigit():
        return None
    return Tick(approval_id.upper(), int(number), ticks=kind == TICK_BUTTON)


def ticked(approval_id: str, keyboard: Sequence[tuple[str, str]], options: int) -> frozenset[int]:
    """The options ticked in a message's buttons, (label, data) as the provider sent them back
    with a press: each box whose data unticks it is ticked."""
    marks = (ticking(data) for _, data in keyboard)
    return frozenset(
        m.option
        for m in marks
        if m is not None
        and m.approval_id == approval_id
        and m.option is not None
        and not m.ticks
        and 1 <= m.option <= options
    )


def ticked_now(request: ApprovalRequest, ticks: frozenset[int]) -> str:
    """What the presser of a box is told: what is ticked, and what to do next."""
    if not ticks:
        return f"{request.id}: nothing ticked. Tick the options you want, then press Done."
    chosen = ", ".join(request.options[n - 1] for n in sorted(ticks))
    return f"{request.id}: ticked {chosen}. Press Done to answer with them."


def nothing_ticked(approval_id: str) -> str:
    """What Done pressed with no box ticked tells the presser (nothing is answered)."""
    return f"{approval_id}: tick at least one option, then press Done."


def pressed(data: str) -> tuple[str, Behavior] | None:
    """(approval id, behavior) a button's data stands for; None for any other button."""
    prefix, approval_id, short, _ = _parts(data)
    if prefix != BUTTON_PREFIX or short not in BUTTON_BEHAVIOR or len(approval_id) != 4:
        return None
    return approval_id.upper(), BUTTON_BEHAVIOR[short]


@dataclass(frozen=True)
class CodedAnswer:
    """A reply carrying an approval's code: "YES K7QF", "ALWAYS K7QF", "NO K7QF not now"."""

    approval_id: str
    behavior: Behavior
    reason: str | None  # a denial's words after the code, or a question's answer
    typed_as_code: bool  # the code in capitals or with a digit, as the request spelled it


def coded(text: str) -> CodedAnswer | None:
    """The answer a reply carries, when it starts with YES, NO or ALWAYS and a code."""
    found = _CODED.fullmatch(text)
    if found is None:
        return None
    word, code, rest = found[1].lower(), found[2], found[3].strip()
    behavior = CODE_WORDS[word]
    reason = rest[:REASON_CHARS] if behavior in ("deny", "answer") and rest else None
    return CodedAnswer(
        approval_id=code.upper(),
        behavior=behavior,
        reason=reason,
        typed_as_code=code.isupper() or any(c.isdigit() for c in code),
    )


def remote(via: str) -> bool:
    """Whether a surface sends a request through a provider's servers (a chat; a call, its
    speech and its call system): what looks like a secret is hidden there, saying so in place,
    and a request it cannot show whole is answered where it is shown whole instead."""
    return via == "call" or (is_provider(via) and abilities(via).remote)


def shown_remotely(request: ApprovalRequest) -> ApprovalRequest:
    """The request as a :func:`remote` surface shows it: what looks like a secret
    replaced by :data:`HIDDEN_SECRET`, which says so in place."""

    def hide(text: str) -> str:
        # Marked with a NUL first, which shown text never holds (it is shown as a mark): the
        # mark's own words must not look like a value to hide again.
        return mask_secrets(text, mark="\x00").replace("\x00", HIDDEN_SECRET)

    return request.model_copy(
        update={
            "input_text": hide(request.input_text),
            "question": hide(request.question) if request.question is not None else None,
            "options": [hide(o) for o in request.options],
        }
    )


def hidden_on(request: ApprovalRequest, via: str) -> str | None:
    """Why the surface `via` does not show `request` whole, and so may not let the agent go on
    with it (a denial it may take), with where to answer instead; None when it shows it whole."""
    if not request.whole:
        return (
            f"{request.id} is too long to show whole anywhere but the agent's own terminal: "
            "answer it in the agent's own dialog there"
        )
    if not remote(via):
        return None
    if shown_remotely(request) != request:
        return (
            f"part of {request.id} looks like a secret, so it is hidden here: read it whole and "
            f"answer it with {WHERE_WHOLE}"
        )
    can = abilities(via)
    if can.answers == "codes" and not can.whole_text and len(asks(request)) > TEXT_REQUEST_CHARS:
        return (
            f"{request.id} is too long for a text message: read it whole and answer it with "
            f"{WHERE_WHOLE}"
        )
    if can.answers == "push" and len(asks(request)) > PUSH_REQUEST_CHARS:
        return (
            f"{request.id} is too long for a push notification: read it whole and answer it "
            f"with {WHERE_WHOLE}"
        )
    if via == "call" and request.ask == "plan" and len(request.question or "") > PLAN_SPOKEN_CHARS:
        return (
            f"{request.id}'s plan is too long to read out on a call: read it whole and answer "
            f"it with {WHERE_WHOLE}"
        )
    return None


def refused_answer(approval_id: str) -> str:
    """What someone who may not answer an approval is told."""
    return f"Only the agent's approvers may answer {approval_id}: nothing changed."


def reply_with(request: ApprovalRequest, *, hidden: str | None = None) -> str:
    """How to answer by text; where to answer instead when the text does not show the request
    whole (`hidden`, :func:`hidden_on`'s reason)."""
    if hidden is not None:
        return f"Not to be answered here: {hidden}."
    if request.ask == "question":
        return (
            f"Reply ANSWER {request.id} followed by an option's number or label (several: "
            "comma-separated) or your own words."
        )
    if request.ask == "plan":
        return (
            f"Reply YES {request.id} to approve it, or NO {request.id} followed by what to "
            "change to keep it planning."
        )
    line = f"Reply YES {request.id} or NO {request.id}"
    if request.suggestions:
        line += f" (ALWAYS {request.id}: allow for the rest of this session)"
    return line + f". NO {request.id} followed by words tells the agent why."


def asks(request: ApprovalRequest, *, spoken: bool = False) -> str:
    """What the request asks, whole: who asks to use what, with its input; the question with its
    options; or the plan. A chat shows it in pieces, attached, or its first part
    (:mod:`gateway.approvals.chat_posts`). `spoken`: one sentence as a person hears it on a call or
    reads it in an SMS ("backend asks to run: rm -rf build"), a question's options left to
    :func:`keys`."""
    if spoken:
        return _spoken(request)
    if request.ask == "question":
        options = "\n".join(f"{n}. {o}" for n, o in enumerate(request.options, 1))
        return f"{request.agent_id} asks: {request.question}\n{options}".rstrip()
    if request.ask == "plan":
        return f"{request.agent_id} asks to carry out its plan:\n{request.question or request.input_text}"
    return f"{request.agent_id} asks to use {request.tool}:\n{request.input_text}"


def the_rest(request: ApprovalRequest) -> str:
    """Where a chat that shows only a request's first part sends the human for the whole."""
    return f" […] (the whole {ASKED[request.ask]}: `agentcomms approvals`, or the console)"


def footer(request: ApprovalRequest) -> str:
    """What follows a request in a chat with buttons, under which the buttons sit."""
    line = f"(approval {request.id})"
    if request.ask == "question":  # several options, or words of one's own, by reply
        line += f"\n{reply_with(request)}"
    return line


def _spoken(request: ApprovalRequest) -> str:
    if request.ask == "question":
        return f"{request.agent_id} asks: {request.question or '?'}"
    if request.ask == "plan":
        plan = request.question or ""
        if len(plan) > PLAN_SPOKEN_CHARS:
            plan = plan[: PLAN_SPOKEN_CHARS - 1] + "… (the whole plan: agentcomms approvals)"
        return f"{request.agent_id} asks to carry out its plan: {plan}".strip()
    if request.tool == "Bash":
        return f"{request.agent_id} asks to run: {request.input_text}"
    return f"{request.agent_id} asks to use {request.tool}: {request.input_text}"


def keys(
    request: ApprovalRequest, *, last: str = "hear it again", hidden: str | None = None
) -> str:
    """What a phone says after the request: the key for each answer, and the key that does
    `last` (hear it again on a ladder's call, skip on a call coming in); only that key, and
    where to answer, when the call does not show the request whole (`hidden`)."""
    if hidden is not None:
        again = QUESTION_AGAIN_KEY if request.ask == "question" else "3"
        return f"This is not answered on the phone: {hidden}. Press {again} to {last}."
    if request.ask == "question":
        choices = ", ".join(f"{n} for {o}" for n, o in enumerate(request.options, 1))
        if request.multi:
            return (
                f"Press the numbers of your choices, then the pound key: {choices}. Or say "
                f"them. {QUESTION_AGAIN_KEY} to {last}."
            )
        return f"Press {choices}, or say your answer. {QUESTION_AGAIN_KEY} to {last}."
    if request.ask == "plan":
        return f"Press 1 to approve, 2 to keep planning, 3 to {last}."
    return f"Press 1 to allow, 2 to deny, 3 to {last}."


@dataclass(frozen=True)
class PhoneAnswer:
    """What a key pressed (or a word said) on a call answers: a behavior, and a question's
    chosen labels."""

    behavior: Behavior
    answer: str | None = None


def heard_on_phone(request: ApprovalRequest, heard: str) -> PhoneAnswer | None:
    """The answer that keys or words heard on a call give `request`; None for anything else
    (say it again, or skip): an unclear answer is never taken for one."""
    text = heard.lower()
    if request.ask != "question":
        words = re.findall(r"[a-z0-9]+", text)
        behavior = PHONE_WORDS.get(words[0]) if words else None
        return PhoneAnswer(behavior) if behavior is not None else None
    options = request.options
    if re.fullmatch(r"[\d\s#*,]+", text):
        picked = [int(d) for d in re.findall(r"\d", text)]
    else:
        numbers = [NUMBER_WORDS[w] for w in re.findall(r"[a-z]+", text) if w in NUMBER_WORDS]
        named = [
            n
            for n, option in enumerate(options, 1)
            if re.search(rf"(?<![a-z0-9]){re.escape(option.lower())}(?![a-z0-9])", text)
        ]
        picked = named or numbers
    picked = list(dict.fromkeys(picked))
    if not picked or not all(1 <= n <= len(options) for n in picked):
        return None
    if len(picked) > 1 and not request.multi:
        return None
    return PhoneAnswer("answer", ", ".join(options[n - 1] for n in sorted(picked)))


def said(view: ApprovalView) -> str:
    """How it was decided, for people: "allowed by Alice on Telegram"."""
    d = view.decision
    if d is None:
        return "still open"
    how = how_decided(d, view.request, answer_chars=ANSWER_SHOWN)
    if d.behavior in ("terminal", "timeout"):  # nobody answered it on a surface
        return how
    return f"{how} on {SURFACE_NAMES.get(d.via, d.via)}"


def settled_footer(view: ApprovalView) -> str:
    """What follows a request in a chat with buttons once decided (the buttons gone)."""
    return f"{view.request.id}: {said(view)}"


def outcome(view: ApprovalView) -> str:
    """What a chat of plain text is told once it is decided: one short line."""
    r = view.request
    return f"{r.id} ({r.agent_id}, {r.tool}): {said(view)}"
