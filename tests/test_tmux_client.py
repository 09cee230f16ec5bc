"""One tmux client, as the bridge runs it: what it printed, how it failed, and that a client
the bridge gave up on (timed out, or its delivery cancelled) does not live on."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from agentcomms.bridge.client import run_client
from agentcomms.errors import PaneNotFound, TmuxError
from tests.support.tmux import Tmux
from tests.support.waiting import eventually


def _clients_waiting(socket: str, marker: str) -> list[int]:
    """The pids of tmux clients on `socket` whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"tmux") and socket.encode() in argv and marker.encode() in argv:
            found.append(int(entry))
    return found


async def test_a_client_prints_its_output(tmux: Tmux) -> None:
    tmux.new_session("s")
    out = await run_client(
        "tmux", tmux.socket, ["display-message", "-p", "-t", "s", "#{session_name}"],
        stdin=None, timeout=5,
    )  # fmt: skip
    assert out == "s\n"


async def test_stdin_reaches_the_client(tmux: Tmux) -> None:
    tmux.new_session("s")
    await run_client("tmux", tmux.socket, ["load-buffer", "-b", "b", "-"], stdin=b"a\nb", timeout=5)
    assert tmux.run("show-buffer", "-b", "b").stdout == "a\nb"


async def test_no_server_is_a_missing_pane(tmp_path: Path) -> None:
    socket = str(tmp_path / "nobody.sock")
    with pytest.raises(PaneNotFound) as raised:
        await run_client("tmux", socket, ["display-message", "-p", "x"], stdin=None, timeout=5)
    assert socket in str(raised.value)  # which server was not there


async def test_a_failing_command_says_what_tmux_said(tmux: Tmux) -> None:
    tmux.new_session("s")
    with pytest.raises(TmuxError, match="unknown command: no-such-command"):
        await run_client("tmux", tmux.socket, ["no-such-command"], stdin=None, timeout=5)


async def test_no_tmux_says_so(tmux: Tmux) -> None:
    with pytest.raises(TmuxError, match="tmux is not installed"):
        await run_client("no-tmux-here", tmux.socket, ["ls"], stdin=None, timeout=5)


async def test_a_client_past_its_time_is_ended(tmux: Tmux) -> None:
    tmux.new_session("s")
    marker = f"sleep-{uuid.uuid4().hex}"  # names this test's client among the processes
    with pytest.raises(TmuxError, match=r"did not answer within 0\.3 s"):
        await run_client(
            "tmux", tmux.socket, ["run-shell", "-d", "30", f"echo {marker}"],
            stdin=None, timeout=0.3,
        )  # fmt: skip
    assert not _clients_waiting(tmux.socket, f"echo {marker}")


async def test_a_cancelled_client_is_ended(tmux: Tmux) -> None:
    tmux.new_session("s")
    marker = f"sleep-{uuid.uuid4().hex}"
    argv = ["run-shell", "-d", "30", f"echo {marker}"]
    task = asyncio.create_task(run_client("tmux", tmux.socket, argv, stdin=None, timeout=60))
    await eventually(lambda: _clients_waiting(tmux.socket, f"echo {marker}"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: not _clients_waiting(tmux.socket, f"echo {marker}"))
