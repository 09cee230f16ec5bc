"""Claude Code's own "Do you want to proceed?" read exactly off a screen, and each key pressed
only while tmux finds that very dialog on the pane, in the same invocation.

The screens in ``tests/screens`` were captured row by row (``capture-pane -p``) from the real
Claude Code 2.1.332 in auto mode, its own default, against a scripted model that does not pass
its server-side safety check through: first "Auto mode can't check actions in this session"
(which is not this dialog: a notice), then, for the same call, "Do you want to proceed?"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentcomms.bridge.own_dialog import pattern_of, press_once, read_own_dialog, read_pane
from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.errors import BridgeError
from agentcomms.models import PaneTarget
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

SCREENS = Path(__file__).parent / "screens"
PROCEED = (SCREENS / "claude-2.1.332-auto-proceed.txt").read_text()
CANNOT_CHECK = (SCREENS / "claude-2.1.332-auto-cannot-check.txt").read_text()
DOWN = (b"\x1b[B", b"\x1bOB")


def test_auto_modes_proceed_dialog_is_read_whole() -> None:
    dialog = read_own_dialog(PROCEED)

    assert dialog is not None
    assert (dialog.title, dialog.options, dialog.pointer) == ("Bash command", ("No", "Yes"), 0)
    assert dialog.shown == (
        "Run a command\ntouch /tmp/fh/out0.txt\n"
        "Auto mode can't check actions in this session, so this one needs your approval"
    )
    rows = PROCEED.split("\n")
    assert rows[dialog.option_rows[0] - 1] == " \u276f No"
    # Every line with a word in it is pinned to its row, the question and the way out too.
    assert {rows[row - 1].strip() for row, _ in dialog.pins} >= {
        "Bash command",
        "touch /tmp/fh/out0.txt",
        "Do you want to proceed?",
        "Esc to cancel · Tab to amend",
    }


def _changed(old: str, new: str) -> str:
    assert old in PROCEED
    return PROCEED.replace(old, new, 1)


@pytest.mark.parametrize(
    ("why", "screen"),
    [
        ("the dialog before it, which asks something else", CANNOT_CHECK),
        ("its top is off the screen", re.sub(r"\n\u2500{20,}\n Bash", "\n\n Bash", PROCEED)),
        (
            "a second question in what it shows",
            _changed("\n touch", "\n Do you want to proceed?\n touch"),
        ),
        ("something under its way out", PROCEED.rstrip("\n") + "\n  trailing words\n"),
        ("no way out it names", _changed(" Esc to cancel", " Tab to amend")),
        ("no plain Yes to choose", _changed("   Yes", "   Yes, and more")),
        ("two of them", _changed("   Yes", "   Yes\n   Yes")),
        ("an option out of line", _changed("   Yes", "     Yes")),
        ("no pointer", _changed(" \u276f No", "   No")),
    ],
)
def test_a_screen_not_exactly_that_dialog_is_no_such_dialog(why: str, screen: str) -> None:
    assert read_own_dialog(screen) is None, why


def test_what_the_agent_shows_reaches_the_format_as_no_syntax() -> None:
    untrusted = "rm -rf #{pane_id},}{ ; $(x) [a] | \\ ^$ .* \u00e9 \u276f"

    pattern = pattern_of(untrusted)

    assert set(pattern) <= set("rmfpaneidx\u00e9\u276f .")
    assert re.fullmatch(pattern, untrusted)


# -- the keys, pressed by a real tmux server only while it finds the dialog ----------------------


def _shows(
    tmux: Tmux, screen: str, tmp_path: Path, name: str = "dialog"
) -> tuple[PaneTarget, str, Path]:
    """A pane of the dialog's size showing `screen` exactly, recording every key pressed."""
    shown, keys = tmp_path / f"{name}.screen", tmp_path / f"{name}.keys"
    shown.write_text(screen.rstrip("\n"))
    keys.touch()
    tmux.new_session(name, f"cat {shown}; stty raw -echo; exec cat >> {keys}")
    target = f"{name}:0.0"
    return PaneTarget(target=target, socket=tmux.socket), target, keys


async def _pane_id(pane: PaneTarget) -> str:
    return (await TmuxAdapter().pane_info(pane)).pane_id


async def _drawn(tmux: Tmux, target: str) -> bool | None:
    return True if "Esc to cancel" in tmux.capture(target) else None


@pytest.mark.parametrize(
    ("pointer_on", "allow", "pressed"),
    [("No", True, "Down"), ("Yes", True, "Enter"), ("No", False, "Escape")],
)
async def test_each_key_goes_where_the_pointer_is(
    tmux: Tmux, tmp_path: Path, pointer_on: str, allow: bool, pressed: str
) -> None:
    screen = PROCEED
    if pointer_on == "Yes":
        screen = _changed(" \u276f No\n   Yes", "   No\n \u276f Yes")
    pane, target, keys = _shows(tmux, screen, tmp_path)
    await eventually(lambda: _drawn(tmux, target))
    dialog = read_own_dialog(tmux.run("capture-pane", "-p", "-t", target).stdout)
    assert dialog is not None

    assert await press_once(TmuxAdapter(), tmux.socket, await _pane_id(pane), dialog, allow=allow)
    expected = {"Down": DOWN, "Enter": (b"\r",), "Escape": (b"\x1b",)}[pressed]

    async def recorded() -> bytes | None:
        return keys.read_bytes() or None

    assert await eventually(recorded) in expected


async def test_a_dialog_that_changed_since_it_was_read_gets_no_key(
    tmux: Tmux, tmp_path: Path
) -> None:
    """The human was shown `touch …/out0.txt`; the pane now asks for another command in the
    same place: neither the allow nor the deny is pressed."""
    read = read_own_dialog(PROCEED)
    assert read is not None
    other = _changed("\n touch /tmp/fh/out0.txt", "\n touch /tmp/fh/out9.txt")
    pane, target, keys = _shows(tmux, other, tmp_path)
    await eventually(lambda: _drawn(tmux, target))
    pane_id = await _pane_id(pane)

    for allow in (True, False):
        assert await press_once(TmuxAdapter(), tmux.socket, pane_id, read, allow=allow) is None
    # The same dialog on other rows (scrolled one up) is not the one read either.
    scrolled = PROCEED.split("\n", 1)[1] + "\n"
    moved, moved_target, moved_keys = _shows(tmux, scrolled, tmp_path, "scrolled")
    await eventually(lambda: _drawn(tmux, moved_target))
    moved_id = await _pane_id(moved)
    assert await press_once(TmuxAdapter(), tmux.socket, moved_id, read, allow=True) is None
    assert keys.read_bytes() == moved_keys.read_bytes() == b""


async def test_a_pane_is_read_in_one_look_and_a_missing_one_is_an_error(
    tmux: Tmux, tmp_path: Path
) -> None:
    pane, target, _ = _shows(tmux, PROCEED, tmp_path)
    await eventually(lambda: _drawn(tmux, target))

    pane_id, dialog = await read_pane(TmuxAdapter(), pane)

    assert pane_id == await _pane_id(pane)
    assert dialog == read_own_dialog(PROCEED)
    with pytest.raises(BridgeError):
        await read_pane(TmuxAdapter(), PaneTarget(target="nowhere:0.0", socket=tmux.socket))
