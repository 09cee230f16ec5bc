"""The probe: what one tmux invocation reads of a pane before anything is typed there.

``show-options -p -t T remain-on-exit`` comes first for its strictness: ``display-message -t``
silently falls back to another pane (or prints nothing and succeeds) when the target is wrong,
which would type a human's message into the wrong program. It names one option, which prints
nothing unless set on the pane: all of them would print the record too (32 KB once a pane has
seen a thousand messages), which cost the tmux server and client about 1.3 ms of CPU per
delivery. Then one tagged line of formats: the pane's id, whether its program ended, its look
(:mod:`.look`) and the record of the events already typed there. With the screen, the clients
attached to the session (is one in control mode?) come before that line and the pane's text
after it.
"""

from __future__ import annotations

import re

from agentcomms.bridge.look import LOOK_FORMATS, PaneInfo
from agentcomms.errors import TmuxError

# The last event typed or pressed in the pane: for people and status displays.
LAST_EVENT_OPTION = "@agentcomms_last_event"
# The events typed or pressed recently, newest first, each followed by a space: the at-most-once
# check. Interrupts share it; their ids are distinct events too.
RECENT_EVENTS_OPTION = "@agentcomms_recent_events"

_PANE_ID = re.compile(r"%[0-9]+")
_PROBE_TAG = "agentcomms-probe"
_CLIENT_TAG = "agentcomms-client"
_PROBE_FORMAT = "\t".join(
    (
        _PROBE_TAG,
        "#{pane_id}",
        "#{pane_dead}",
        *LOOK_FORMATS,
        "#{pane_pid}",
        "#{" + RECENT_EVENTS_OPTION + "}",
    )
)
_FIELDS = _PROBE_FORMAT.count("\t") + 1


def strictly(target: str) -> list[str]:
    """A command that fails when `target` names no pane, and prints next to nothing when it does
    (one pane option, shown only when set on the pane)."""
    return ["show-options", "-p", "-t", target, "remain-on-exit"]


def probe_commands(target: str, *, screen: bool) -> list[list[str]]:
    """The probe of `target` (a checked target), with what the pane shows when `screen`."""
    commands = [strictly(target)]
    if screen:
        clients = "#{client_control_mode}"
        commands.append(["list-clients", "-t", target, "-F", f"{_CLIENT_TAG} {clients}"])
    commands.append(["display-message", "-p", "-t", target, _PROBE_FORMAT])
    if screen:
        commands.append(["capture-pane", "-p", "-J", "-t", target])
    return commands


def read_probe(out: str, target: str) -> tuple[PaneInfo, bool, str]:
    """What the probe's output says: the pane, whether its program ended, and what it shows
    ("" unless asked)."""
    # The probe's line is the tagged one (show-options prints a line when the option is set).
    lines = out.splitlines()
    at = next((i for i, ln in enumerate(lines) if ln.startswith(_PROBE_TAG + "\t")), -1)
    fields = lines[at].split("\t", _FIELDS - 1) if at >= 0 else []
    if len(fields) != _FIELDS or not _PANE_ID.fullmatch(fields[1]):
        raise TmuxError(f"unexpected answer from tmux for pane {target!r}: {out!r}")
    _, pane_id, dead, in_mode, command, dialog, busy, keys_at, unshared = fields[:9]
    pressed, pid, recent = fields[9:]
    info = PaneInfo(
        pane_id=pane_id,
        # The last piece is "" or a fragment cut by the trim: never a whole id.
        recent_events=tuple(recent.split(" ")[:-1]),
        in_mode=in_mode not in ("", "0"),
        command=command,
        dialog=dialog not in ("", "0"),
        busy=busy not in ("", "0"),
        pid=int(pid) if pid.isdigit() else 0,
        keys_at=int(keys_at) if keys_at.isdigit() else 0,
        unshared=unshared == "1",
        pressed=pressed,
        control_clients=f"{_CLIENT_TAG} 1" in lines[:at],
    )
    screen = "\n".join(lines[at + 1 :]) + "\n" if at + 1 < len(lines) else ""
    return info, dead == "1", screen
