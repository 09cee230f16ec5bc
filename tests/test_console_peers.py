"""The console is the human's: a process in a registered agent's tmux pane that replays the
human's cookie is refused, saying why, and so is a process of another Unix user; the human's own
request with the same cookie opens it. The refusal comes before any route: an answer posted from
the pane is refused as a page read is."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, ConsoleConfig
from tests.support.browser import console_address, console_cookies
from tests.support.own_user import system_python
from tests.support.stack import Stack, register, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

# A request as any program can make one: the address, the cookie, and a form when it posts.
ASK = """
import sys, urllib.error, urllib.request
data = sys.argv[3].encode() if len(sys.argv) > 3 else None
req = urllib.request.Request(sys.argv[1], data=data, headers={"Cookie": sys.argv[2]})
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        print(r.status)
except urllib.error.HTTPError as e:
    print(e.code)
    print(e.read().decode())
print("done")
"""


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, home: Path
) -> AsyncIterator[Stack]:
    def configure(cfg: Config) -> Config:
        return cfg.model_copy(update={"console": ConsoleConfig(enabled=True, port=0)})

    async with running_stack(temporal_env.client, tmp_path, configure=configure) as s:
        yield s


def _cookie(stack: Stack) -> str:
    ((name, value),) = console_cookies(stack).items()
    return f"{name}={value}"


async def _asked_in_pane(tmux: Tmux, target: str, tmp_path: Path, *args: str) -> str:
    """``ASK`` run by the pane's shell, as an agent's Bash tool runs a command; what it printed."""
    script, out = tmp_path / "ask.py", tmp_path / f"out-{uuid.uuid4().hex[:8]}"
    script.write_text(ASK)
    quoted = " ".join(f"'{arg}'" for arg in args)
    tmux.run("send-keys", "-t", target, "-l", f"{sys.executable} {script} {quoted} > {out} 2>&1")
    tmux.run("send-keys", "-t", target, "Enter")

    def printed() -> str | None:
        text = out.read_text() if out.exists() else ""
        return text if "done" in text else None

    return await eventually(printed, timeout=30)


async def test_a_process_in_an_agents_pane_replaying_the_cookie_is_refused(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    target = tmux.new_session("agent")
    await register(stack, agent, tmux, target)
    address, cookie = console_address(stack, token=False), _cookie(stack)

    page = await _asked_in_pane(tmux, target, tmp_path, address, cookie)
    assert page.startswith("403"), page
    assert f"agent {agent!r}'s tmux pane" in page and "may not act for its human" in page, page
    answer = await _asked_in_pane(
        tmux, target, tmp_path, f"{address}approvals/ABCD", cookie, "behavior=allow"
    )
    assert answer.startswith("403") and f"agent {agent!r}'s tmux pane" in answer, answer

    # The human's request, outside the panes, with the same cookie.
    async with httpx.AsyncClient() as http:
        human = await http.get(address, headers={"Cookie": cookie})
    assert human.status_code == 200, human.text


@pytest.mark.skipif(os.getuid() != 0, reason="starting another user's process needs root")
async def test_another_unix_user_with_the_cookie_is_refused(stack: Stack) -> None:
    address, cookie = console_address(stack, token=False), _cookie(stack)
    asked = await asyncio.to_thread(
        subprocess.run,
        [
            "runuser",
            "-u",
            "nobody",
            "--",
            system_python(),
            "-c",
            ASK,
            address,
            cookie,
        ],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=60,
    )
    assert asked.stdout.startswith("403"), (asked.stdout, asked.stderr)
    assert "comes from Unix user nobody" in asked.stdout, asked.stdout
