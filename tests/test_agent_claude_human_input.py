"""What the human has in the real Claude Code's pane is theirs. Their words half-typed in the input
box, with Claude at its prompt, with the "/" command menu open, or typed ahead while a turn runs:
a message is not typed after them (Enter would submit both as one prompt). A settings panel open
over the box (/config, /permissions): no message is typed into it. Either way `send --wait` does
not say the message was delivered; it waits, `agents` says why, and it goes as a prompt of its own
once the human is done, their words untouched.

One Claude with agentcomms' hooks, and its human at a terminal, serve the module; each test
leaves the box empty and Claude at its prompt."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentcomms.bridge.look import input_box
from tests.fakes.anthropic import text
from tests.support.agents import Attended, ClaudePane, attended_claude
from tests.support.cli import cli
from tests.support.tmux import SENT_HEADER
from tests.support.waiting import eventually

__all__ = ["attended_claude"]

DRAFTED = "the human (a draft in the input box)"
DIALOG = "a dialog in the pane"
# Long enough for a message that was going to be typed to have reached the model.
QUIET_S = 3.0


async def state_is(a: Attended[ClaudePane], state: str) -> dict[str, Any] | None:
    row = await a.row()
    return row if row["state"] == state else None


async def half_type(claude: ClaudePane, words: str) -> None:
    """The human types `words` in Claude's input box and does not press Enter."""
    await claude.keys("-l", words)
    await claude.wait_for_screen(words)


async def test_a_half_typed_prompt_keeps_the_message_out_of_the_box(
    attended_claude: Attended[ClaudePane],
) -> None:
    a, claude = attended_claude, attended_claude.pane
    await claude.wait_ready()
    await eventually(lambda: state_is(a, "ready"))
    await half_type(claude, "please also check the")

    done = await cli(a.home, "send", a.agent_id, "deploy is frozen", "--wait", "--timeout", "6")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(": queued")  # not "submitted": the agent did not get it
    waiting = await a.row()
    assert (waiting["state"], waiting["waiting_for"], waiting["pending"]) == (
        "waiting",
        DRAFTED,
        1,
    )
    await asyncio.sleep(QUIET_S)
    assert input_box(claude.screen()) == "please also check the"
    assert not any("frozen" in t for t in claude.model.human_texts)

    # The human finishes their own prompt: it reaches the model as they wrote it, and the
    # message goes after it, alone.
    await claude.type(" logs")
    assert await claude.model.wait_for_human("please also") == "please also check the logs"
    typed = await claude.model.wait_for_human("frozen", timeout=60)
    assert typed == f"{SENT_HEADER}deploy is frozen"
    await eventually(lambda: state_is(a, "ready"), timeout=30)


async def test_the_command_menu_open_keeps_the_message_out_of_it(
    attended_claude: Attended[ClaudePane],
) -> None:
    a, claude = attended_claude, attended_claude.pane
    await claude.wait_ready()
    await eventually(lambda: state_is(a, "ready"))
    await claude.keys("/")
    await claude.wait_for_screen("/add-dir")  # the menu of commands, over the box

    await cli(a.home, "send", a.agent_id, "menu or not, hello")
    await eventually(lambda: state_is(a, "waiting"))
    await asyncio.sleep(QUIET_S)
    assert "/add-dir" in claude.screen()
    assert not any("menu or not" in t for t in claude.model.human_texts)

    await claude.answer("/add-dir", "Escape")  # the human leaves the menu
    # Apart: a terminal reads Esc and a key right after it as one Alt+key.
    await claude.keys("C-u")  # and clears the box
    typed = await claude.model.wait_for_human("menu or not", timeout=60)
    assert typed == f"{SENT_HEADER}menu or not, hello"
    await eventually(lambda: state_is(a, "ready"), timeout=30)


async def test_words_typed_ahead_in_a_turn_keep_the_message_waiting_after_it(
    attended_claude: Attended[ClaudePane],
) -> None:
    a, claude = attended_claude, attended_claude.pane
    await claude.wait_ready()
    release = asyncio.Event()
    claude.model.on("rebuild the index", text("Index rebuilt.", hold=release))
    await claude.type("rebuild the index")
    await claude.model.wait_for_human("rebuild the index")
    await eventually(lambda: state_is(a, "busy"))
    await half_type(claude, "then prune the")  # typed ahead while Claude works
    await cli(a.home, "send", a.agent_id, "cache is cold")

    release.set()  # Stop: Claude is ready, with the human's words in its box
    await claude.wait_for_screen("Index rebuilt.")
    drafted = await eventually(lambda: state_is(a, "waiting"), timeout=30)
    assert drafted["waiting_for"] == DRAFTED
    await asyncio.sleep(QUIET_S)
    assert input_box(claude.screen()) == "then prune the"
    assert not any("cold" in t for t in claude.model.human_texts)

    await claude.keys("C-u")
    assert await claude.model.wait_for_human("cold", timeout=60) == f"{SENT_HEADER}cache is cold"
    await eventually(lambda: state_is(a, "ready"), timeout=30)


@pytest.mark.parametrize(
    ("command", "shown"),
    [("/config", "Esc to go back"), ("/permissions", "Esc to close")],
    ids=["config", "permissions"],
)
async def test_a_settings_panel_open_keeps_the_message_out_of_it(
    attended_claude: Attended[ClaudePane], command: str, shown: str
) -> None:
    """Keys typed into a panel move through its settings and Enter changes one."""
    a, claude = attended_claude, attended_claude.pane
    await claude.wait_ready()
    await eventually(lambda: state_is(a, "ready"))
    await claude.type(command)
    await claude.wait_for_screen(shown)

    words = f"{command} open or not, hello"
    done = await cli(a.home, "send", a.agent_id, words, "--wait", "--timeout", "6")
    assert done.stdout.strip().endswith(": queued"), done.stdout
    waiting = await a.row()
    assert (waiting["state"], waiting["waiting_for"]) == ("waiting", DIALOG)
    await asyncio.sleep(QUIET_S)
    assert shown in claude.screen()
    assert not any(words in t for t in claude.model.human_texts)

    # The human closes the panel (/config takes two: the first leaves its search box).
    await claude.answer("to navigate", "Escape")
    assert await claude.model.wait_for_human(words, timeout=60) == f"{SENT_HEADER}{words}"
    await eventually(lambda: state_is(a, "ready"), timeout=30)
