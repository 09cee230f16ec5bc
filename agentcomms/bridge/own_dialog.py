"""Claude Code's own "Do you want to proceed?", read off its pane exactly, and answered with keys
that tmux checks against the screen in the same invocation that presses them.

In auto mode, when its safety check cannot judge an action, Claude Code asks in a dialog of its
own and runs no hook (measured, 2.1.332)::

    ────────────────────────────  (the rule over the dialog)
     Bash command
     Run a command
    ╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌
     touch /tmp/out.txt
    ╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌
     Auto mode can't check actions in this session, so this one needs your approval

     Do you want to proceed?
     > No
       Yes

     Esc to cancel · Tab to amend

Its pointer (``>`` here, U+276F on screen) starts on "No": Enter there cancels the call and
interrupts the turn, as Esc does. So "allow" is Down until the pointer is on "Yes", then Enter; "deny" is Esc. Each key is pressed
by the tmux server only while the screen still shows this very dialog, each of its lines on the
row it was read on (``#{C/r:…}`` is the first row that matches, counted from 1), with the
pointer where that key expects it: a dialog that changed, moved or closed meanwhile gets no key.
A screen that is not exactly this (the dialog's top cut off, a second question, options that are
not a plain "Yes" to choose) is no dialog of this kind: it stays a notice, answered in the
terminal.

What the dialog shows comes from the agent and is untrusted: it reaches the format only as a
pattern of letters, digits, spaces, characters past ASCII and ``.`` for anything else, which
neither tmux's format nor the regular expression reads as syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentcomms.bridge.checks import check_pane
from agentcomms.bridge.commands import command_string
from agentcomms.bridge.look import all_of
from agentcomms.bridge.probe import strictly
from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.errors import TmuxError
from agentcomms.models import PaneTarget

QUESTION = "Do you want to proceed?"
CANCEL_HINT = "Esc to cancel"
POINTER = "\u276f"
# The rule Claude Code draws over its dialogs (and its input box); its dialogs' own separators
# are dashed (U+254C) and do not end the dialog.
_RULE = re.compile(r"^\s*\u2500{8,}\s*$")
_DASHED = re.compile(r"^\s*\u254c{8,}\s*$")
_POINTED = re.compile(r"^( *)\u276f (\S.*)$")
# The option that lets the call run: "Yes" (auto mode's dialog), "1. Yes" (manual mode's).
_YES = re.compile(r"(?:[0-9]+\. )?Yes")
_PRESSED = "agentcomms-pressed"
_PANE_TAG = "agentcomms-pane"
_PANE_ID = re.compile(r"%[0-9]+")
# A condition longer than this does not fit one tmux invocation with room to spare.
_CONDITION_CHARS = 10_000


@dataclass(frozen=True)
class OwnDialog:
    """One "Do you want to proceed?" as it stands on a pane's screen."""

    title: str  # what asks: "Bash command"
    shown: str  # what the dialog says between its title and its question, line by line
    options: tuple[str, ...]  # the options' labels, top to bottom
    pointer: int  # the option the pointer is on
    option_rows: tuple[int, ...]  # each option's row, counted from 1
    indent: str  # before the pointer
    pins: tuple[tuple[int, str], ...]  # (row, pattern) of every other line that has a word

    @property
    def yes(self) -> int:
        return next(i for i, label in enumerate(self.options) if _YES.fullmatch(label))

    def showing(self, pointer: int) -> str:
        """A tmux condition true while the pane shows this dialog, its pointer on `pointer`."""
        checks = [f"#{{==:#{{C/r:^{pattern}$}},{row}}}" for row, pattern in self.pins]
        for i, (label, row) in enumerate(zip(self.options, self.option_rows, strict=True)):
            mark = f"{POINTER} " if i == pointer else "  "
            checks.append(f"#{{==:#{{C/r:^{pattern_of(self.indent + mark + label)}$}},{row}}}")
        return all_of(*checks)


def pattern_of(line: str) -> str:
    """A regular expression that matches `line` alone, safe in a tmux format: ASCII letters,
    digits and spaces, and characters past ASCII, as they are; anything else as ``.``."""
    return "".join(
        c
        if c == " " or (c.isascii() and c.isalnum()) or (not c.isascii() and c.isprintable())
        else "."
        for c in line
    )


def read_own_dialog(rows: str) -> OwnDialog | None:
    """The dialog on a screen captured row by row (``capture-pane -p``, wrapped lines not
    joined), or None when the screen shows no such dialog exactly."""
    lines = [line.rstrip() for line in rows.split("\n")]
    asked = [i for i, line in enumerate(lines) if line.strip() == QUESTION]
    if len(asked) != 1:
        return None
    question = asked[0]
    rules = [i for i in range(question) if _RULE.match(lines[i])]
    if not rules:
        return None  # its top is off the screen: not all of it can be read
    body = [line.strip() for line in lines[rules[-1] + 1 : question] if line.strip()]
    if len(body) < 2:
        return None
    block = []
    for line in lines[question + 1 :]:
        if not line.strip():
            break
        block.append(line)
    pointed = [m for m in map(_POINTED.match, block) if m is not None]
    if len(pointed) != 1:
        return None
    indent = pointed[0].group(1)
    options: list[str] = []
    pointer = -1
    row = question + 1
    while row < len(lines) and lines[row].strip():
        line = lines[row]
        if (marked := _POINTED.match(line)) is not None and marked.group(1) == indent:
            pointer = len(options)
            options.append(marked.group(2))
        elif line.startswith(indent + "  ") and not line[len(indent) + 2].isspace():
            options.append(line[len(indent) + 2 :])
        else:
            return None
        row += 1
    if pointer < 0 or sum(bool(_YES.fullmatch(o)) for o in options) != 1:
        return None
    rest = [line for line in lines[row:] if line.strip()]
    if len(rest) != 1 or not rest[0].strip().startswith(CANCEL_HINT):
        return None  # something under it, or no way out that it names
    option_rows = tuple(range(question + 2, row + 1))
    pins = _pins(lines, range(rules[-1] + 1, len(lines)), skip=set(option_rows))
    pinned = {r for r, _ in pins}
    last = max(i for i, line in enumerate(lines) if line.strip()) + 1
    if question + 1 not in pinned or last not in pinned:
        return None  # the question or the way out would not be checked
    dialog = OwnDialog(
        title=body[0],
        shown="\n".join(line for line in body[1:] if not _DASHED.match(line)),
        options=tuple(options),
        pointer=pointer,
        option_rows=option_rows,
        indent=indent,
        pins=tuple(pins),
    )
    if len(dialog.showing(pointer)) > _CONDITION_CHARS:
        return None
    return dialog


def _pins(lines: list[str], rows: range, *, skip: set[int]) -> list[tuple[int, str]]:
    """(row from 1, pattern) for each line in `rows` with a word in it that is the first line
    its pattern matches: tmux's search answers the first row, so a line that an earlier one
    also matches could not be checked where it is."""
    pins = []
    for i in rows:
        if i + 1 in skip or not any(c.isalnum() for c in lines[i]):
            continue
        pattern = re.compile(f"^{pattern_of(lines[i])}$")
        first = next(j for j, line in enumerate(lines) if pattern.match(line))
        if first == i:
            pins.append((i + 1, pattern.pattern[1:-1]))
    return pins


async def read_pane(adapter: TmuxAdapter, pane: PaneTarget) -> tuple[str, OwnDialog | None]:
    """The pane's id and the dialog it shows, if it shows one exactly: one tmux invocation."""
    check_pane(pane)
    out = await adapter.run_commands(
        pane.socket,
        [
            strictly(pane.target),  # fails when the target names no pane
            ["display-message", "-p", "-t", pane.target, f"{_PANE_TAG} #{{pane_id}}"],
            ["capture-pane", "-p", "-t", pane.target],
        ],
    )
    lines = out.split("\n")
    at = next((i for i, line in enumerate(lines) if line.startswith(_PANE_TAG + " ")), -1)
    pane_id = lines[at].split(" ", 1)[1] if at >= 0 else ""
    if not _PANE_ID.fullmatch(pane_id):
        raise TmuxError(f"unexpected answer from tmux for pane {pane.target!r}: {out[:200]!r}")
    return pane_id, read_own_dialog("\n".join(lines[at + 1 :]))


async def press_once(
    adapter: TmuxAdapter, socket: str | None, pane_id: str, dialog: OwnDialog, *, allow: bool
) -> str | None:
    """Press the next key towards the answer, if the pane still shows `dialog`: Esc to deny;
    to allow, Enter with the pointer on "Yes", else Down or Up towards it. The key pressed, or
    None when the screen is no longer this dialog with the pointer anywhere a key expects."""
    steps: list[tuple[str, str]] = []
    if not allow:
        steps.append((dialog.showing(dialog.pointer), "Escape"))
        # The pointer may have moved since it was read: wherever it is, Esc cancels.
        steps += [(dialog.showing(i), "Escape") for i in range(len(dialog.options))]
    else:
        yes = dialog.yes
        for at in range(len(dialog.options)):
            key = "Enter" if at == yes else ("Down" if at < yes else "Up")
            steps.append((dialog.showing(at), key))
    commands: list[list[str]] = []
    seen: set[str] = set()
    for condition, key in steps:
        if condition in seen:
            continue
        seen.add(condition)
        # pane_id is a checked "%N" and the key one of ours: safe to parse. At most one of
        # these conditions holds: they differ in where the pointer is.
        pressing = [
            ["send-keys", "-t", pane_id, key],
            ["display-message", "-p", f"{_PRESSED} {key}"],
        ]
        same_pane = f"#{{==:#{{pane_id}},{pane_id}}}"
        commands.append(
            [
                "if-shell",
                "-F",
                "-t",
                pane_id,
                all_of(same_pane, condition),
                command_string(pressing),
            ]
        )
    out = await adapter.run_commands(socket, commands)
    pressed = [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith(_PRESSED)]
    return pressed[0] if pressed else None
