"""What the agent's input box holds, and pressing Enter once more when a typed prompt stayed there.

A prompt typed and submitted is normally carried by the agent's ``UserPromptSubmit`` within a
moment. When none comes, the pane tells which of two things happened: the text is still in the
input box (the Enter was lost: a key read as part of a paste, a redraw) and one more Enter
submits it; or the box is empty and no hook spoke, so the agent's hooks are missing.

The input box is read by :func:`agentcomms.bridge.look.input_box`. A long paste shows there as
``[Pasted text #1 …]``.

The Enter is pressed by the tmux server in one invocation with its checks: still the pane the
prompt was typed into, no dialog or copy mode (an Enter would answer a dialog), and this message
not pressed for before (a pane option keeps the record, as for typing), so a retried activity
never presses twice.
"""

from __future__ import annotations

from agentcomms.bridge.checks import check_event_id
from agentcomms.bridge.commands import command_string
from agentcomms.bridge.look import all_of, input_box, ready_conditions
from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.models import PaneTarget

ENTERED_AGAIN_OPTION = "@agentcomms_entered_again"
ENTERED_AGAIN_CHARS = 4_000
_PRESSED = "agentcomms-entered-again"
# How much of the needle must show in the box: the start of the text, before any wrap or cut.
NEEDLE_SHOWN = 40


def holds(box: str, needle: str) -> bool:
    """Whether the box shows the text whose start is `needle`."""
    start = " ".join(needle.split())[:NEEDLE_SHOWN]
    return bool(start) and (start in box or "[Pasted text" in box)


async def follow_up(
    adapter: TmuxAdapter, pane: PaneTarget, event_id: str, needle: str, *, press: bool
) -> tuple[bool, bool]:
    """(the text is still in the input box, Enter was pressed once more)."""
    check_event_id(event_id)
    info = await adapter.pane_info(pane)
    screen = await adapter.run_commands(
        pane.socket, [["capture-pane", "-p", "-J", "-t", info.pane_id]]
    )
    if not holds(input_box(screen), needle):
        return False, False
    if not press:
        return True, False
    pane_id = info.pane_id
    record = f"{event_id} #{{={ENTERED_AGAIN_CHARS}:{ENTERED_AGAIN_OPTION}}}"
    pressing = [
        ["send-keys", "-t", pane_id, "Enter"],
        ["set-option", "-F", "-p", "-t", pane_id, ENTERED_AGAIN_OPTION, record],
        ["display-message", "-p", f"{_PRESSED} {event_id}"],
    ]
    # pane_id and event id are checked ("%N", no '#', spaces or quotes): safe to parse.
    unpressed = f"#{{?#{{m:* {event_id} *, #{{{ENTERED_AGAIN_OPTION}}}}},0,1}}"
    condition = all_of(f"#{{==:#{{pane_id}},{pane_id}}}", unpressed, *ready_conditions("dialogs"))
    out = await adapter.run_commands(
        pane.socket,
        [["if-shell", "-F", "-t", pane_id, condition, command_string(pressing)]],
    )
    return True, f"{_PRESSED} {event_id}" in out
