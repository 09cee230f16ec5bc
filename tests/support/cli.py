"""agentcomms as a person runs it: the installed command, in an environment that keeps none of
the runner's own agentcomms settings; `up` as a process of its own; the CLI against a stack."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tests.support.home import write_config
from tests.support.stack import Stack
from tests.support.tmux import Tmux

AGENTCOMMS = str(Path(sys.executable).parent / "agentcomms")


def env_for(home: Path, **overrides: str) -> dict[str, str]:
    """This process's environment without its AGENTCOMMS_* settings, at home in `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCOMMS_", "AGENTCALL_"))}
    env["AGENTCOMMS_HOME"] = str(home)
    # The console on a port the system picks: runs side by side never collide on 8235.
    env["AGENTCOMMS_CONSOLE__PORT"] = "0"
    # Likewise the hook reports' door (and so `install` writes command hooks, as before).
    env["AGENTCOMMS_SERVER__HOOK_PORT"] = "0"
    env.update(overrides)
    return env


def run(env: dict[str, str], *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AGENTCOMMS, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float = 30) -> list[str]:
    """The lines `proc` printed up to the first with `needle` in it."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"{needle!r} never printed; got {lines!r}; exit {proc.poll()}")


def as_in_a_terminal() -> None:
    """For a child the test signals as a terminal would (`preexec_fn`): Ctrl-C's SIGINT and a
    closed terminal's SIGHUP at their defaults. A runner started as a background job ignores
    SIGINT, one under `nohup` SIGHUP; its children inherit that, and agentcomms leaves a
    signal ignored that it started ignored (as `nohup agentcomms up` asks)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def start_up(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """`agentcomms up` as a process, its output a line-buffered pipe, stopped by signals."""
    return subprocess.Popen(
        [AGENTCOMMS, "up", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Wide enough that rich prints each row on one line.
        bufsize=1,
        preexec_fn=as_in_a_terminal,
    )


def stop(proc: subprocess.Popen[str]) -> None:
    """Kill a process the test did not manage to stop, and close its pipe."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if proc.stdout:
        proc.stdout.close()


def cli_home(tmp_path: Path, stack: Stack) -> Path:
    """A home whose config points the CLI at the stack's gateway socket."""
    home = tmp_path / "cli-home"
    write_config(home, {"server": {"socket_path": str(stack.cfg.server.socket())}})
    return home


def _cli_env(home: Path, inside_tmux: Tmux | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCOMMS_", "TMUX"))}
    if inside_tmux is not None:  # as a shell in a pane of that server sees it
        env["TMUX"] = f"{inside_tmux.socket},1,0"
    env["AGENTCOMMS_HOME"] = str(home)
    env["COLUMNS"] = "200"
    return env


async def cli(
    home: Path, *args: str, stdin: str = "", inside_tmux: Tmux | None = None
) -> subprocess.CompletedProcess[str]:
    """`agentcomms ARGS` run from `home`, in a thread (the stack it talks to runs on this loop)."""
    env = _cli_env(home, inside_tmux)
    return await asyncio.to_thread(
        subprocess.run,
        [AGENTCOMMS, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )


async def cli_on_terminal(
    home: Path, *args: str, prompt: str, answer: str, timeout: float = 30
) -> tuple[int, str]:
    """`agentcomms ARGS` on a real pseudo-terminal, as a person at a terminal runs it: once it
    prints `prompt`, `answer` is typed and Enter pressed. Its exit code and all it printed."""
    return await asyncio.to_thread(_on_terminal, home, args, prompt, answer, timeout)


def _on_terminal(
    home: Path, args: tuple[str, ...], prompt: str, answer: str, timeout: float
) -> tuple[int, str]:
    leader, follower = os.openpty()
    proc = subprocess.Popen(
        [AGENTCOMMS, *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=_cli_env(home),
        start_new_session=True,
    )
    os.close(follower)
    printed, answered = b"", False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # EIO: the command ended and closed the terminal
                    break
                if not chunk:
                    break
                printed += chunk
            elif proc.poll() is not None:
                break
            if not answered and prompt.encode() in printed:
                os.write(leader, answer.encode() + b"\r")
                answered = True
        code = proc.wait(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    return code, printed.decode(errors="replace")


@asynccontextmanager
async def inbox_followed(stack: Stack, tmp_path: Path) -> AsyncIterator[asyncio.StreamReader]:
    """`agentcomms inbox --follow` running against `stack`, as a person at a terminal runs it:
    its output, a line each thing it shows."""
    home = cli_home(tmp_path, stack)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCOMMS_")}
    following = await asyncio.create_subprocess_exec(
        AGENTCOMMS, "inbox", "--follow",
        env={**env, "AGENTCOMMS_HOME": str(home), "COLUMNS": "200"},
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert following.stdout is not None
    try:
        yield following.stdout
    finally:
        following.terminate()
        await following.wait()
