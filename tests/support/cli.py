"""agentcomms as a person runs it: the installed command, in an environment that keeps none of
the runner's own agentcomms settings; `up` as a process of its own; the CLI against a stack."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.home import write_config
from tests.support.stack import Stack
from tests.support.tmux import Tmux

AGENTCOMMS = str(Path(sys.executable).parent / "agentcomms")


def env_for(home: Path, **overrides: str) -> dict[str, str]:
    """This process's environment without its AGENTCOMMS_* settings, at home in `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCOMMS_", "AGENTCALL_"))}
    env["AGENTCOMMS_HOME"] = str(home)
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


def start_up(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """`agentcomms up` as a process, its output a line-buffered pipe."""
    return subprocess.Popen(
        [AGENTCOMMS, "up", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Wide enough that rich prints each row on one line.
        bufsize=1,
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


async def cli(
    home: Path, *args: str, stdin: str = "", inside_tmux: Tmux | None = None
) -> subprocess.CompletedProcess[str]:
    """`agentcomms ARGS` run from `home`, in a thread (the stack it talks to runs on this loop)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCOMMS_", "TMUX"))}
    if inside_tmux is not None:  # as a shell in a pane of that server sees it
        env["TMUX"] = f"{inside_tmux.socket},1,0"
    env["AGENTCOMMS_HOME"] = str(home)
    env["COLUMNS"] = "200"
    return await asyncio.to_thread(
        subprocess.run,
        [AGENTCOMMS, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )
