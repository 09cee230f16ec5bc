"""The pane's look, checked by tmux in the same command as the typing: a dialog, copy mode or a
running turn on screen means nothing is typed (a real tmux server, a pane that shows the text
and records what is typed into it)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from agentcomms.bridge import TmuxAdapter
from agentcomms.bridge.look import crashed_to_shell
from agentcomms.errors import PaneNotReady
from agentcomms.models import PaneLook, PaneTarget, Typing
from tests.support.tmux import Recorder, Tmux, start_recorder, wait_for_command

DIALOG = " Do you want to proceed?\n \u276f 1. Yes\n   2. No\n\n Esc to cancel"
BUSY = "* Thinking... (esc to interrupt)"
QUOTED = "> Do you want to proceed? was what it asked"
# Codex's own approval prompt (0.169): no busy line under it, and its keys are letters ("y").
CODEX_DIALOG = (
    "  Would you like to run the following command?\n\n  $ touch summary.txt\n\n"
    "\u203a 1. Yes, proceed (y)\n  2. No, and tell Codex what to do differently (esc)\n\n"
    "  Press enter to confirm or esc to cancel"
)


async def showing(tmux: Tmux, tmp_path: Path, screen: str) -> Recorder:
    """A pane that shows `screen`, then records what is typed into it."""
    return await start_recorder(tmux, tmp_path / "typed.bin", name="look", screen=screen)


def typing(pane: PaneTarget, look: PaneLook, event_id: str = "evt_look1") -> Typing:
    return Typing(pane=pane, event_id=event_id, text="stop, do not run anything", look=look,
                  submit_delay_ms=0)  # fmt: skip


@pytest.mark.parametrize("known", [False, True], ids=["first delivery", "known pane"])
async def test_nothing_is_typed_into_a_dialog(tmux: Tmux, tmp_path: Path, known: bool) -> None:
    pane = await showing(tmux, tmp_path, DIALOG)
    adapter = TmuxAdapter()
    if known:
        await adapter.pane_info(pane.pane)  # the one-invocation path: tmux looks as it types
    with pytest.raises(PaneNotReady) as refused:
        await adapter.deliver(typing(pane.pane, "dialogs"))
    assert refused.value.reason == "dialog"
    assert await pane.settled() == b""
    # Asked to type whatever the pane shows, it types (the look is the delivery's choice).
    await adapter.deliver(typing(pane.pane, "none", "evt_look2"))
    assert await pane.wait_for(b"stop, do not run anything\r") == b"stop, do not run anything\r"


async def test_nothing_is_typed_into_codexs_own_approval_prompt(tmux: Tmux, tmp_path: Path) -> None:
    pane = await showing(tmux, tmp_path, CODEX_DIALOG)
    with pytest.raises(PaneNotReady) as refused:
        await TmuxAdapter().deliver(typing(pane.pane, "dialogs"))
    assert refused.value.reason == "dialog"
    assert await pane.settled() == b""


async def test_a_running_turn_holds_the_text_unless_only_dialogs_count(
    tmux: Tmux, tmp_path: Path
) -> None:
    pane = await showing(tmux, tmp_path, BUSY)
    adapter = TmuxAdapter()
    with pytest.raises(PaneNotReady) as refused:
        await adapter.deliver(typing(pane.pane, "idle"))
    assert refused.value.reason == "busy"
    assert await pane.settled() == b""
    await adapter.deliver(typing(pane.pane, "dialogs", "evt_look2"))
    assert await pane.wait_for(b"stop, do not run anything\r") == b"stop, do not run anything\r"


async def test_copy_mode_holds_the_text(tmux: Tmux, tmp_path: Path) -> None:
    pane = await showing(tmux, tmp_path, "> ")
    tmux.run("copy-mode", "-t", pane.pane.target)
    with pytest.raises(PaneNotReady) as refused:
        await TmuxAdapter().deliver(typing(pane.pane, "dialogs"))
    assert refused.value.reason == "copy-mode"
    assert await pane.settled() == b""


async def test_a_quoted_dialog_line_in_the_transcript_is_not_a_dialog(
    tmux: Tmux, tmp_path: Path
) -> None:
    pane = await showing(tmux, tmp_path, QUOTED)
    await TmuxAdapter().deliver(typing(pane.pane, "idle"))
    assert await pane.wait_for(b"stop, do not run anything\r") == b"stop, do not run anything\r"


async def test_a_shell_counts_as_exited_only_for_the_ready_look(tmux: Tmux, tmp_path: Path) -> None:
    target = tmux.new_session("shell")  # sh, at its prompt
    await wait_for_command(tmux, target, "sh")
    pane = PaneTarget(target=target, socket=tmux.socket)
    with pytest.raises(PaneNotReady) as refused:
        await TmuxAdapter().deliver(typing(pane, "ready"))
    assert refused.value.reason == "exited"


async def test_messages_typed_together_are_each_recorded_once(tmux: Tmux, tmp_path: Path) -> None:
    pane = await showing(tmux, tmp_path, "> ")
    adapter = TmuxAdapter()
    together = Typing(
        pane=pane.pane, event_id="evt_one", also_ids=["evt_two"], text="one\ntwo",
        submit_delay_ms=0, look="idle",
    )  # fmt: skip
    await adapter.deliver(together)
    assert await pane.wait_for(b"one\ntwo\r") == b"one\ntwo\r"
    info = await adapter.pane_info(pane.pane)
    assert info.has_seen("evt_one") and info.has_seen("evt_two")
    # Sent again (a retried delivery), nothing is typed twice.
    again = await adapter.deliver(together)
    assert again.typed is False
    assert await pane.settled() == b"one\ntwo\r"


def test_a_shell_with_a_program_under_it_is_alive() -> None:
    with subprocess.Popen(["sh", "-c", "sleep 30; true"]) as shell:
        try:
            wait_until_parent_of(shell.pid)
            assert crashed_to_shell("sh", shell.pid) is None
        finally:
            shell.kill()


def test_a_shell_with_nothing_under_it_is_an_exited_agent() -> None:
    with subprocess.Popen(["sh"], stdin=subprocess.PIPE) as shell:
        try:
            refused = crashed_to_shell("sh", shell.pid)
            assert refused is not None and refused.reason == "exited"
        finally:
            shell.kill()


def test_a_child_started_by_another_thread_counts() -> None:
    """The pane's first process may be the agent itself, with threads that start programs."""
    started: list[subprocess.Popen[bytes]] = []
    thread = threading.Thread(target=lambda: started.append(subprocess.Popen(["sleep", "30"])))
    thread.start()
    thread.join()
    try:
        assert crashed_to_shell("bash", os.getpid()) is None
    finally:
        started[0].kill()
        started[0].wait()


def wait_until_parent_of(pid: int) -> None:
    """Until `pid` has started its child (sh forks `sleep` a moment after it starts)."""
    for _ in range(500):
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            if f.read().strip():
                return
        time.sleep(0.01)
    raise AssertionError(f"{pid} started no child")
