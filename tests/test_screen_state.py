"""A state no hook confirmed lately is read off the agent's pane before it is shown: a dialog that
no hook reported shows as waiting, an empty prompt after Esc as ready, a pane gone as offline."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from agentcomms.bridge.look import PaneInfo
from agentcomms.bridge.screen_state import (
    OnScreen,
    ScreenCheck,
    is_doubtful,
    shown_for,
    state_on_screen,
)
from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.models import Agent, utcnow
from tests.support.fake_agent import BUSY, DIALOG, PROMPT, start_fake_agent
from tests.support.tmux import Tmux

NOW = utcnow()
LONG_AGO = NOW - timedelta(seconds=30)


@pytest.mark.parametrize(
    ("info", "state"),
    [
        (PaneInfo("%1", (), dialog=True, busy=True), "waiting"),  # a dialog hides the busy line
        (PaneInfo("%1", (), busy=True), "busy"),
        (PaneInfo("%1", ()), "ready"),
    ],
)
def test_the_panes_markers_say_what_the_agent_does(info: PaneInfo, state: str) -> None:
    assert state_on_screen(info, NOW).state == state


def test_a_shell_with_nothing_left_under_it_is_an_agent_that_exited() -> None:
    lone = subprocess.Popen(["sleep", "30"])  # a process with no children, as the shell left
    try:
        assert state_on_screen(PaneInfo("%1", (), command="bash", pid=lone.pid), NOW).state == (
            "offline"
        )
    finally:
        lone.kill()
        lone.wait()


@pytest.mark.parametrize(
    ("state", "since", "target", "doubtful"),
    [
        ("busy", LONG_AGO, "dev:0.0", True),
        ("waiting", LONG_AGO, "dev:0.0", True),
        ("busy", None, "dev:0.0", True),
        ("busy", NOW, "dev:0.0", False),  # a hook said so a moment ago
        ("ready", LONG_AGO, "dev:0.0", False),  # typing reads the pane before it trusts this
        ("busy", LONG_AGO, None, False),  # no pane to read
    ],
)
def test_only_an_old_busy_or_waiting_with_a_pane_is_doubted(
    state: str, since: object, target: str | None, doubtful: bool
) -> None:
    agent = Agent(id="a", state=state, state_since=since, target=target)
    assert is_doubtful(agent, NOW) is doubtful


def test_what_is_shown_is_the_panes_word_and_when_it_was_read() -> None:
    waiting = Agent(
        id="a", state="waiting", waiting_for="permission for Bash: ls", state_since=LONG_AGO
    )
    # The same state: the hook's words say more, the look says when it was true.
    assert shown_for(waiting, OnScreen("waiting", "a dialog on screen", NOW)) == (
        "waiting",
        "permission for Bash: ls",
        NOW,
    )
    assert shown_for(waiting, OnScreen("ready", None, NOW)) == ("ready", None, NOW)
    assert shown_for(waiting, None) == ("waiting", "permission for Bash: ls", LONG_AGO)


async def test_real_panes_confirm_a_dialog_no_hook_reported_and_a_prompt_after_esc(
    tmux: Tmux, tmp_path: Path
) -> None:
    fake = await start_fake_agent(tmux, tmp_path, tmp_path / "no.sock", "claude")
    check = ScreenCheck(TmuxAdapter(), host="here")
    agent = Agent(
        id="a", state="busy", state_since=LONG_AGO, target=fake.target, tmux_socket=tmux.socket
    )
    await fake.showing(DIALOG)
    seen = (await check.confirmed([agent]))["a"]
    assert (seen.state, seen.waiting_for) == (
        "waiting",
        "a dialog on screen (answer it in the terminal)",
    )
    # A look is kept a moment: a console polling every agent does not read each pane each time.
    await fake.showing(PROMPT)
    assert (await check.confirmed([agent]))["a"] == seen
    fresh = ScreenCheck(TmuxAdapter(), host="here")
    assert (await fresh.confirmed([agent]))["a"].state == "ready"
    await fake.showing(BUSY)
    assert (await ScreenCheck(TmuxAdapter(), host="here").confirmed([agent]))["a"].state == "busy"
    # Another host's pane is not this gateway's to read; a pane gone is offline.
    elsewhere = agent.model_copy(update={"host": "other"})
    assert await ScreenCheck(TmuxAdapter(), host="here").confirmed([elsewhere]) == {}
    tmux.run("kill-server", check=False)
    gone = await ScreenCheck(TmuxAdapter(), host="here").confirmed([agent])
    assert gone["a"].state == "offline"
