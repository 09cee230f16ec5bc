"""An agent whose screen the test writes and whose hooks the test fires, in a tmux pane.

The pane runs ``tests/fakes/agent_tui.py``: it shows the test's screen text (a prompt, Claude
Code's permission dialog, a running turn) and records every byte typed into it. Its hooks go
through the real hook command (:func:`agentcomms.agents.hook.main`, the code `agentcomms hook`
runs) with the pane's own ``TMUX`` and ``TMUX_PANE``, to the stack's gateway socket.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentcomms.agents import hook
from tests.support.stack import Stack, register
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

TUI = Path(__file__).resolve().parent.parent / "fakes" / "agent_tui.py"

# Claude Code's input box: the prompt's marker between two rules, its hints under them.
RULE = "\u2500" * 40
PROMPT = f"{RULE}\n\u276f \n{RULE}\n  ? for shortcuts"
BUSY = "* Working... (3s · esc to interrupt)\n\n> "
DIALOG = (
    "Bash command\n\n  touch /tmp/x\n\n Do you want to proceed?\n \u276f 1. Yes\n"
    "   2. No\n\n Esc to cancel · Tab to amend"
)


@dataclass
class FakeAgent:
    tmux: Tmux
    target: str
    pane_id: str
    screen: Path
    record: Path
    socket: Path  # the gateway's

    def show(self, text: str) -> None:
        """Put `text` on the agent's screen (the TUI redraws within a few ms)."""
        tmp = self.screen.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.screen)

    async def showing(self, text: str) -> None:
        """Show `text` and wait until the pane does."""
        self.show(text)
        first = text.splitlines()[0]
        for _ in range(500):
            if first in self.tmux.capture(self.target):
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"the pane never showed {first!r}: {self.tmux.capture(self.target)}")

    def crash(self) -> None:
        """The agent's program dies without a word (no SessionEnd): its shell is left."""
        pid = self.tmux.run("display-message", "-p", "-t", self.target, "#{pane_pid}").stdout
        children = subprocess.run(
            ["pgrep", "-P", pid.strip()], capture_output=True, text=True
        ).stdout.split()
        for child in children:
            os.kill(int(child), signal.SIGKILL)

    def restart(self) -> None:
        """The human starts the agent again in the same pane."""
        command = tui_command(self.screen, self.record, shell_after=True)
        self.tmux.run("respawn-pane", "-k", "-t", self.target, command)

    def typed(self) -> bytes:
        return self.record.read_bytes()

    async def hook(self, event: str, **payload: Any) -> None:
        """Fire one Claude Code hook, as the agent would, from inside its pane."""
        body = {"session_id": "s-1", "hook_event_name": event, **payload}
        env = {
            "TMUX": f"{self.tmux.socket},1,0",
            "TMUX_PANE": self.pane_id,
            "AGENTCOMMS_SOCKET": str(self.socket),
        }
        await asyncio.to_thread(_run_hook, env, ["claude-code", json.dumps(body)])

    async def hook_process(self, event: str, agentcomms: str, **payload: Any) -> None:
        """The same, through the `agentcomms hook claude-code` command with JSON on stdin."""
        body = {"session_id": "s-1", "hook_event_name": event, **payload}
        env = {k: v for k, v in os.environ.items() if k != "AGENTCOMMS_AGENT_ID"}
        env |= {
            "TMUX": f"{self.tmux.socket},1,0",
            "TMUX_PANE": self.pane_id,
            "AGENTCOMMS_SOCKET": str(self.socket),
        }
        proc = await asyncio.create_subprocess_exec(
            agentcomms, "hook", "claude-code",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        out, err = await proc.communicate(json.dumps(body).encode())
        assert (proc.returncode, out) == (0, b""), err


_hook_lock = threading.Lock()


def _run_hook(env: dict[str, str], argv: list[str]) -> None:
    # The hook reads its agent from the environment: one at a time in this process.
    with _hook_lock:
        saved = {k: os.environ.get(k) for k in [*env, "AGENTCOMMS_AGENT_ID"]}
        os.environ.pop("AGENTCOMMS_AGENT_ID", None)
        os.environ.update(env)
        try:
            assert hook.main(argv) == 0
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def tui_command(screen: Path, record: Path, *, shell_after: bool = False) -> str:
    """The stand-in agent's command; with `shell_after`, run as a person's terminal runs an
    agent: `sh -c "agent; exec sh"`, the shell in the foreground all along, a shell left after."""
    command = " ".join(shlex.quote(a) for a in (sys.executable, str(TUI), str(screen), str(record)))
    return f"{command}; exec sh" if shell_after else command


async def start_fake_agent(
    tmux: Tmux, tmp_path: Path, socket: Path, name: str, *, shell_after: bool = False
) -> FakeAgent:
    screen = tmp_path / f"{name}.screen"
    record = tmp_path / f"{name}.typed"
    screen.write_text(PROMPT)
    record.touch()
    target = tmux.new_session(name, tui_command(screen, record, shell_after=shell_after))
    pane_id = tmux.run("display-message", "-p", "-t", target, "#{pane_id}").stdout.strip()
    agent = FakeAgent(tmux, target, pane_id, screen, record, socket)
    await agent.showing(PROMPT)  # drawn: raw mode is on
    return agent


async def agent_row(stack: Any, agent_id: str) -> dict[str, Any] | None:
    """The agent as `agents --json` shows it (`stack`: a tests.support.stack.Stack)."""
    listed = await stack.call("agents")
    return next((a for a in listed["agents"] if a["id"] == agent_id), None)


async def state_is(stack: Any, agent_id: str, state: str) -> dict[str, Any] | None:
    """The agent's row once its state is `state` (for ``eventually``)."""
    row = await agent_row(stack, agent_id)
    return row if row is not None and row["state"] == state else None


async def registered(stack: Any, agent_id: str) -> dict[str, Any] | None:
    """The agent's row once it shows its pane: the mailbox checked the registration, and the
    gateway can match the agent's hooks to it (a hook from a pane not yet shown finds no agent)."""
    row = await agent_row(stack, agent_id)
    return row if row is not None and row["target"] is not None else None


async def ready_agent(stack: Stack, tmux: Tmux, root: Path) -> tuple[str, FakeAgent]:
    """A stand-in agent registered in `stack`, its SessionStart reported and its state `ready`:
    the agent id, and the agent."""
    agent_id = stack.agent_id("claude")
    fake = await start_fake_agent(tmux, root, stack.cfg.server.socket(), "claude")
    await register(stack, agent_id, tmux, fake.target, submit_delay_ms=0)
    # The gateway finds a hook's agent among the registrations the projection shows (the look
    # at registration may find it at its prompt already).
    await eventually(lambda: registered(stack, agent_id))
    await fake.hook("SessionStart", source="startup")
    await eventually(lambda: state_is(stack, agent_id, "ready"))
    return agent_id, fake


async def working(
    stack: Stack, agent_id: str, fake: FakeAgent, prompt: str = "work"
) -> dict[str, Any]:
    """Put a ready stand-in agent on a turn: its UserPromptSubmit reported, its pane showing the
    busy marker, and its state `busy`; the agent's row then."""
    await fake.hook("UserPromptSubmit", prompt=prompt)
    await fake.showing(BUSY)
    row: dict[str, Any] = await eventually(lambda: state_is(stack, agent_id, "busy"))
    return row


@pytest.fixture
async def ready_fake_agent(stack: Stack, tmux: Tmux, tmp_path: Path) -> tuple[str, FakeAgent]:
    """A stand-in agent ready on the test's stack (:func:`ready_agent`): its id, and the agent."""
    return await ready_agent(stack, tmux, tmp_path)
