"""The commands scripts and agent hooks call many times answer at once: they load neither
Temporal's SDK nor SQLAlchemy nor Alembic, which they do not need (the gateway holds those), nor
typer and pydantic (the quick path parses their arguments and reads one key of the config)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import cli_home
from tests.support.stack import Stack
from tests.support.tmux import Tmux, recorder

HEAVY = ("sqlalchemy", "alembic", "temporalio")
# What the quick commands' plain forms do without: `--help` and the other commands use them.
SLOW_TO_START = (*HEAVY, "typer", "click", "pydantic", "pydantic_core", "fastmcp")


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


def _imported_by(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    return loaded_modules(done.stderr)


def test_importing_the_cli_loads_no_heavy_package() -> None:
    entry = _imported_by("import agentcomms.cli")
    assert "agentcomms" in entry  # the parse saw the imports at all
    assert not entry & set(SLOW_TO_START), sorted(entry & set(SLOW_TO_START))
    # The typer app, with every command registered, still loads none of the heavy ones.
    loaded = _imported_by("from agentcomms.cli import app")
    assert "typer" in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


async def test_quick_commands_load_no_slow_package(
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
        ("send", agent, "--wait", "--json"),  # from stdin
        ("interrupt", agent, "-r", "stop"),
        ("reply", "cli:local", "done", "-a", agent),
        ("status",),
        ("status", "--json"),
        ("agents", "--all"),
        ("agents", "--json"),
        ("events", agent),
        ("events", agent, "-n", "5", "--json"),
        ("channels",),
        ("inbox",),
    ]
    for args in commands:
        done = await importtime(home, *args, stdin="piped text\n")
        assert done.returncode == 0, (args, done.stderr[-2000:])
        loaded = loaded_modules(done.stderr)
        assert "agentcomms" in loaded, args
        assert not loaded & set(SLOW_TO_START), (args, sorted(loaded & set(SLOW_TO_START)))
    # The commands did their work: the status lists the workers the gateway sees.
    status = await importtime(home, "status")
    assert "polling agentcomms-host-" in status.stdout, status.stdout


def test_the_hook_is_answered_without_typer_or_pydantic(tmp_path: Path) -> None:
    """`agentcomms hook KIND` runs inside the agent's loop, around every tool call: it goes
    straight to the hook's own entry point (here with no gateway running)."""
    if importlib.util.find_spec("agentcomms.agents") is None or (
        importlib.util.find_spec("agentcomms.agents.hook") is None
    ):
        pytest.skip("this build has no agent hooks (agentcomms.agents.hook)")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agentcomms", "hook", "Stop"],
        env={**os.environ, "AGENTCOMMS_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=60,
        input="{}",
    )
    loaded = loaded_modules(done.stderr)
    assert "agentcomms" in loaded, done.stderr[-2000:]
    assert not loaded & set(SLOW_TO_START), sorted(loaded & set(SLOW_TO_START))
