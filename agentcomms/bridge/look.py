"""How a pane looks when the agent in it is not at its prompt, as tmux formats.

Hooks do not tell everything (Claude Code sends none on Esc, and its first-start dialog is open
while ``SessionStart`` fires), and a dialog can open between any look and the typing. So the
look is taken by the tmux server itself, in the same stretch of its command queue as the paste
(``if-shell -F``, no shell): ``#{C/r:…}`` searches the pane's visible text and is the matching
line (0 for none), ``#{pane_in_mode}`` is copy mode, ``#{pane_current_command}`` the program.

The markers are Claude Code's (2.1.x): its permission prompt ("Do you want to proceed?", a numbered
menu, "Esc to cancel"), its questions and menus ("Enter to select"), its panels over the input box
(/config's "Esc to go back", /permissions' "Esc to close"), its first-start nudge ("Make auto
mode your default permission mode?"), and the status line of a running turn ("esc to
interrupt"); and Gemini CLI's (0.61): its permission dialogs ("Allow execution of …?", "Apply this
change?"), and its running turn ("esc to cancel, 3s"); and Codex's (0.169) approval overlays
("Would you like to run the following command?" … "Press enter to confirm or esc to cancel"),
which it shows when its PermissionRequest hook gave no answer (agentcomms down, or an approval
left to the terminal): text typed there is keys to it ("y" approves). The dialog lines are
anchored at the start of a line, where a quoted message in the transcript ("> Do you want…")
does not match.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from agentcomms.bridge.checks import is_event_id
from agentcomms.errors import PaneNotReady

# No ',', '}' or '#' in these: they would end the format they sit in.
DIALOG_MARKERS = (
    r"^[ │]*(Do you want to proceed\?|Make auto mode your default permission mode\?)"
    "|^[ │]*\u276f [0-9]+\\.|Enter to select|Esc to (cancel|go back|close)"  # \u276f: the menu's pointer
    r"|^[ │]*(Allow execution of|Apply this change\?)"  # Gemini CLI's
    # Codex's approval overlays, which hide its busy line ("esc to interrupt") while they show.
    r"|^ *(Would you like to (run the following command|make the following edits|grant these "
    r"permissions|send input to the existing terminal)\?|Press enter to confirm or esc to cancel)"
)
# Claude Code's and Codex's; Gemini CLI's ("esc to cancel, 3s": "." stands for the comma).
BUSY_MARKERS = r"esc to interrupt|esc to cancel. [0-9]"
# The input box: the last line that starts with the prompt's marker (Claude Code's U+276F, or
# ">") down to the rule under it. The transcript above repeats earlier prompts behind the same
# marker; the box is always the lowest one.
_PROMPT_LINE = re.compile(r"^\s*[>\u276f](?:[\s\u00a0]|$)")
# What an empty box shows in grey, not a draft: Gemini CLI's (0.61).
PLACEHOLDERS = frozenset({"Type your message or @path/to/file"})
_RULE = re.compile(r"^\s*[\u2500\u2501\u2550-]{8,}\s*$")
# A pane whose program is a shell: the agent has exited.
SHELLS = r"^-?(ba|z|fi|da|k|tc|c)?sh$"

# The interrupt last pressed in the pane: Esc puts Claude Code's cancelled prompt back in its box.
PRESSED_OPTION = "@agentcomms_pressed"
# Not shared with another session: a grouped session, or a window linked into another, takes the
# human's keys under that session's stamp (see BoxSeenEmpty).
_UNSHARED = "#{?#{||:#{session_grouped},#{window_linked}},0,1}"

# What the probe reads of the look, in this order (see PaneInfo).
LOOK_FORMATS = (
    "#{pane_in_mode}",
    "#{pane_current_command}",
    "#{C/r:" + DIALOG_MARKERS + "}",
    "#{C/r:" + BUSY_MARKERS + "}",
    "#{session_activity}",
    _UNSHARED,
    "#{" + PRESSED_OPTION + "}",
)
# The looks under which a draft in the box keeps a message out, and those of them under which a
# box read empty is trusted for a while (under "alive" a crashed agent is read from /proc as
# well, every time).
DRAFT_LOOKS = ("idle", "alive", "ready")
TRUSTING_LOOKS = ("idle", "ready")
# How long the box, once read empty, is trusted without reading it again while nothing stamps
# it (see BoxSeenEmpty): what writes there without a key (an outside `tmux send-keys`, the
# agent itself) is still found within this long.
BOX_TRUSTED_S = 10.0


@dataclass(frozen=True)
class PaneInfo:
    """What the probe learns about a live pane."""

    pane_id: str  # "%7": stable for the pane's life, unlike "session:window.pane"
    recent_events: tuple[str, ...]  # newest first
    in_mode: bool = False  # copy mode (or another mode) is on
    command: str = ""  # the program in the pane's foreground
    dialog: bool = False  # a dialog or menu is on screen
    busy: bool = False  # the agent shows a turn running
    pid: int = 0  # the pane's first process (its shell, or the agent itself)
    keys_at: int = 0  # tmux's stamp of the session's last key or attach, in whole seconds
    unshared: bool = True  # no grouped session or linked window takes keys for it
    pressed: str = ""  # the last interrupt pressed there (PRESSED_OPTION)
    control_clients: bool = False  # a control-mode client is attached (read with the screen)

    def has_seen(self, event_id: str) -> bool:
        """True when an earlier attempt already typed or pressed `event_id` in this pane."""
        return event_id in self.recent_events

    def not_ready(self, look: str) -> PaneNotReady | None:
        """Why the pane may not be typed into under `look`, or None when it may."""
        return refusal(
            look, in_mode=self.in_mode, command=self.command, dialog=self.dialog, busy=self.busy
        )


@dataclass(frozen=True)
class BoxSeenEmpty:
    """The agent's input box read empty, and what would show that someone wrote in it since.

    tmux stamps a session's activity at every key a client of the session sends, and at every
    attach; ``send-keys`` stamps nothing. A box read empty therefore stays empty until the stamp
    moves or an interrupt of ours is pressed (Esc puts a cancelled prompt back), and the next
    delivery need not read it again: tmux checks that neither happened, in the same stretch
    as the typing (``conditions``). It is not trusted when a key may come unstamped: the stamp
    was this second's (the stamp is whole seconds: a later key in it would not move it), a
    grouped session or a linked window takes keys under another session's stamp, or a
    control-mode client is attached (iTerm2's tmux integration sends the human's keys as
    ``send-keys``)."""

    pane_id: str
    keys_at: int
    pressed: str
    read_at: float  # time.monotonic() when it was read

    def trusted(self, pane_id: str | None, now: float) -> bool:
        return pane_id == self.pane_id and now - self.read_at < BOX_TRUSTED_S

    def conditions(self) -> list[str]:
        """Format conditions, true while nobody could have written in the box since. The pane
        id and the event ids are checked, the stamp is digits: safe to parse."""
        return [
            f"#{{==:#{{session_activity}},{self.keys_at}}}",
            _UNSHARED,
            f"#{{==:#{{{PRESSED_OPTION}}},{self.pressed}}}",
        ]


def box_seen_empty(info: PaneInfo, *, before: int, read_at: float) -> BoxSeenEmpty | None:
    """What a look that found no draft lets the next deliveries trust, or None. `before`: the
    wall clock's whole second before the look was asked for."""
    if info.control_clients or not info.unshared or not 0 < info.keys_at < before:
        return None
    if info.pressed and not is_event_id(info.pressed):
        return None  # not an id of ours: nothing to hand to a format
    return BoxSeenEmpty(info.pane_id, info.keys_at, info.pressed, read_at)


def refusal(
    look: str, *, in_mode: bool, command: str, dialog: bool, busy: bool
) -> PaneNotReady | None:
    """Why a pane that looks like this may not be typed into under `look` ("none": anything
    goes; "dialogs": no dialog or copy mode; "idle": nor a running turn; "ready": nor a shell)."""
    if look == "none":
        return None
    if in_mode:
        return PaneNotReady("the pane is in copy mode", reason="copy-mode")
    if dialog:
        return PaneNotReady("a dialog or menu is open in the pane", reason="dialog")
    if look in DRAFT_LOOKS and busy:
        return PaneNotReady("the agent is working on a turn", reason="busy")
    if look == "ready" and re.fullmatch(SHELLS, command):
        return PaneNotReady(f"the pane runs a shell ({command}): the agent exited", reason="exited")
    return None


def crashed_to_shell(command: str, pid: int) -> PaneNotReady | None:
    """Why a pane whose agent left only its shell may not be typed into, or None. A shell in
    the foreground alone says nothing (an agent started by `bash -c` keeps bash there all its
    life): the shell with no program left under it does. Read from /proc: the delivery runs on
    the pane's own host."""
    if not re.fullmatch(SHELLS, command) or pid <= 0 or _has_children(pid):
        return None
    return PaneNotReady(
        f"the pane runs only a shell ({command}): the agent exited", reason="exited"
    )


def _has_children(pid: int) -> bool:
    """Whether process `pid` has a child (True where /proc cannot say: another machine's or
    another namespace's tmux server, whose processes this one does not see)."""
    if not os.path.exists(f"/proc/{pid}"):
        return True
    # Each of its threads lists its own children: a few reads, where walking every process's
    # stat costs a millisecond per hundred processes, on each delivery to a quiet agent.
    try:
        return any(
            _read(f"/proc/{pid}/task/{task}/children").strip()
            for task in os.listdir(f"/proc/{pid}/task")
        )
    except OSError:
        pass  # a kernel without those lists: ask every process who its parent is
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    parent = str(pid).encode()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # After the command's closing parenthesis: state, then the parent's pid.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and fields[1] == parent:
            return True
    return False


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def ready_conditions(look: str) -> list[str]:
    """Format conditions, each true when the pane passes one check of `look`."""
    if look == "none":
        return []
    conditions = ["#{?#{pane_in_mode},0,1}", "#{?#{C/r:" + DIALOG_MARKERS + "},0,1}"]
    if look in DRAFT_LOOKS:
        conditions.append("#{?#{C/r:" + BUSY_MARKERS + "},0,1}")
    if look == "ready":
        conditions.append("#{?#{m/r:" + SHELLS + ",#{pane_current_command}},0,1}")
    return conditions


def all_of(*conditions: str) -> str:
    """A tmux format true when every condition is (nested #{&&:…})."""
    joined = conditions[-1]
    for condition in reversed(conditions[:-1]):
        joined = f"#{{&&:{condition},{joined}}}"
    return joined


def input_box(screen: str) -> str:
    """The text in the agent's input box, whitespace folded; "" when it is empty or not found.
    The box ends at a rule (Claude Code draws one under it) or a blank line (Gemini CLI leaves
    one above its footer)."""
    lines = screen.splitlines()
    starts = [i for i, line in enumerate(lines) if _PROMPT_LINE.match(line)]
    if not starts:
        return ""
    box: list[str] = []
    for line in lines[starts[-1] :]:
        if box and (_RULE.match(line) or not line.strip()):
            break
        box.append(line)
    text = " ".join(" ".join(box).split())
    text = text[1:].strip() if text[:1] in (">", "\u276f") else text
    return "" if text in PLACEHOLDERS else text


def draft_in_box(screen: str) -> PaneNotReady | None:
    """Why an agent whose input box holds text may not be typed into, or None. Claude Code puts
    a prompt cancelled by Esc back into its box, and a human at the terminal may be writing one:
    a message typed there would join the human's words into one prompt they did not mean."""
    if not input_box(screen):
        return None
    return PaneNotReady("the human's draft is in the agent's input box", reason="draft")


def at_prompt(screen: str) -> bool:
    """Whether the pane shows an agent's input box (a shell's prompt is not one)."""
    return any(_PROMPT_LINE.match(line) for line in screen.splitlines())
