"""The commands scripts and agent hooks call many times answer at once: they load neither
Temporal's SDK nor SQLAlchemy nor Alembic, which they do not need (the gateway holds those)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli import cli_home
from tests.support.stack import Stack
from tests.support.tmux import Tmux, recorder

HEAVY = ("sqlalchemy", "alembic", "temporalio")


def loaded_modules(stderr: str) -> set[str]:
    """The top-level packages a `python -X importtime` run imported."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


async def importtime(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCOMMS_", "TMUX"))}
    env["AGENTCOMMS_HOME"] = str(home)
    # In a thread: the gateway and worker answering it run on this test's event loop.
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-X", "importtime", "-m", "agentcomms", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )


def test_importing_the_cli_loads_no_heavy_package() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import agentcomms.cli"],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = loaded_modules(done.stderr)
    assert "typer" in loaded  # the parse saw the imports at all
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


async def test_socket_commands_load_no_heavy_package(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("quick")
    target, _ = recorder(tmux, tmp_path, "rec")
    await stack.call(
        "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
    )
    commands = [
        ("send", agent, "hello"),
        ("send", agent, "--wait"),  # from stdin
        ("interrupt", agent),
        ("reply", "cli:local", "done", "-a", agent),
        ("status",),
        ("agents", "--all"),
        ("events", agent),
        ("inbox",),
    ]
    for args in commands:
        done = await importtime(home, *args, stdin="piped text\n")
        assert done.returncode == 0, (args, done.stderr[-2000:])
        loaded = loaded_modules(done.stderr)
        assert "agentcomms" in loaded, args
        assert not loaded & set(HEAVY), (args, sorted(loaded & set(HEAVY)))
    # The commands did their work: the status lists the workers the gateway sees.
    status = await importtime(home, "status")
    assert "polling agentcomms-host-" in status.stdout, status.stdout
