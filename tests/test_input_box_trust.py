"""The agent's input box, once read empty, is not read again before each delivery while nobody
could have written in it: tmux checks, as it types, that no key reached the session (a human's
keys come through a tmux client, which stamps the session's activity) and no interrupt of ours
was pressed. Real tmux, a pane that shows an agent's empty box and records what is typed, and a
person's terminal attached to it."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentcomms.bridge import TmuxAdapter
from agentcomms.bridge.client import run_client
from agentcomms.errors import PaneNotReady
from agentcomms.models import Keypress, PaneTarget, Typing
from tests.support.tmux import Recorder, Terminal, Tmux, start_recorder
from tests.support.waiting import eventually

RULE = "\u2500" * 40
EMPTY_BOX = f"\u23fa Done.\n{RULE}\n\u276f \n{RULE}\n  ? for shortcuts"
DRAFT = f"\u23fa Done.\r\n{RULE}\r\n\u276f please also check the\r\n{RULE}\r\n  ? for shortcuts"


def typing(pane: PaneTarget, event_id: str) -> Typing:
    return Typing(pane=pane, event_id=event_id, text=f"message {event_id}", look="idle",
                  submit_delay_ms=0)  # fmt: skip


def draw(tmux: Tmux, pane: PaneTarget, screen: str) -> None:
    """The program in the pane draws `screen` (no key involved: written to the pane's tty)."""
    tty = tmux.run("display-message", "-p", "-t", pane.target, "#{pane_tty}").stdout.strip()
    with open(tty, "w") as out:
        out.write("\x1b[2J\x1b[H" + screen)


@pytest.fixture
def invocations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The arguments of every tmux client the bridge starts."""
    started: list[list[str]] = []

    async def counted(
        tmux: str, socket: str | None, args: list[str], *, stdin: bytes | None, timeout: float
    ) -> str:
        started.append(args)
        return await run_client(tmux, socket, args, stdin=stdin, timeout=timeout)

    monkeypatch.setattr("agentcomms.bridge.tmux.run_client", counted)
    yield started


async def empty_box(tmux: Tmux, tmp_path: Path) -> Recorder:
    """A pane showing an agent's empty input box, whose session's last key stamp is past."""
    pane = await start_recorder(tmux, tmp_path / "typed.bin", name="box", screen=EMPTY_BOX)
    await asyncio.sleep(1.1)  # the stamp counts whole seconds: the box is read in a later one
    return pane


async def attached(tmux: Tmux) -> Terminal:
    terminal = Terminal(tmux, "box")
    await eventually(lambda: asyncio.to_thread(terminal.attached), timeout=10)
    await asyncio.sleep(1.1)  # attaching stamps the session too
    return terminal


async def test_a_box_read_empty_is_not_read_again_for_the_next_message(
    tmux: Tmux, tmp_path: Path, invocations: list[list[str]]
) -> None:
    pane = await empty_box(tmux, tmp_path)
    adapter = TmuxAdapter()
    await adapter.deliver(typing(pane.pane, "evt_one"))
    first = len(invocations)
    await adapter.deliver(typing(pane.pane, "evt_two"))
    both = b"message evt_one\rmessage evt_two\r"
    assert await pane.wait_for(both) == both
    assert first == 2 and len(invocations) == 3, invocations  # the look and the typing; typing
    assert "capture-pane" not in invocations[-1]


async def test_a_humans_draft_typed_at_the_terminal_holds_the_next_message(
    tmux: Tmux, tmp_path: Path
) -> None:
    pane = await empty_box(tmux, tmp_path)
    terminal = await attached(tmux)
    adapter = TmuxAdapter()
    await adapter.deliver(typing(pane.pane, "evt_one"))
    assert await pane.wait_for(b"message evt_one\r") == b"message evt_one\r"

    await asyncio.to_thread(terminal.keys, "-l", "please also check the")
    typed_before = await pane.wait_for(b"message evt_one\rplease also check the")
    draw(tmux, pane.pane, DRAFT)  # the agent shows what the human typed in its box
    with pytest.raises(PaneNotReady) as refused:
        await adapter.deliver(typing(pane.pane, "evt_two"))
    assert refused.value.reason == "draft"
    assert await pane.settled() == typed_before  # the human's keys, and nothing of ours


async def test_an_interrupt_pressed_by_another_worker_has_the_box_read_again(
    tmux: Tmux, tmp_path: Path
) -> None:
    """Esc puts Claude Code's cancelled prompt back in its box, and send-keys stamps nothing:
    tmux keeps the last interrupt pressed on the pane, and the typing checks it."""
    pane = await empty_box(tmux, tmp_path)
    adapter = TmuxAdapter()
    await adapter.deliver(typing(pane.pane, "evt_one"))
    assert await pane.wait_for(b"message evt_one\r") == b"message evt_one\r"

    pressed = Keypress(pane=pane.pane, event_id="evt_stop", key="Escape")
    assert await TmuxAdapter().interrupt(pressed)
    typed_before = await pane.wait_for(b"message evt_one\r\x1b")
    draw(tmux, pane.pane, DRAFT)
    with pytest.raises(PaneNotReady) as refused:
        await adapter.deliver(typing(pane.pane, "evt_two"))
    assert refused.value.reason == "draft"
    assert await pane.settled() == typed_before  # the human's keys, and nothing of ours


async def test_with_a_control_mode_client_attached_the_box_is_read_every_time(
    tmux: Tmux, tmp_path: Path, invocations: list[list[str]]
) -> None:
    """iTerm2's tmux integration sends the human's keys as send-keys: nothing stamps them."""
    pane = await empty_box(tmux, tmp_path)
    attach = ["tmux", "-S", tmux.socket, "-C", "attach", "-t", "box"]
    with subprocess.Popen(attach, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL) as control:  # noqa: ASYNC220
        try:
            await asyncio.sleep(1.1)  # attaching stamps the session
            adapter = TmuxAdapter()
            await adapter.deliver(typing(pane.pane, "evt_one"))
            await adapter.deliver(typing(pane.pane, "evt_two"))
            both = b"message evt_one\rmessage evt_two\r"
            assert await pane.wait_for(both) == both
            assert sum("capture-pane" in args for args in invocations) == 2, invocations
        finally:
            control.kill()
