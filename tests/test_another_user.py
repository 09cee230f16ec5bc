"""An agent that runs as its own Unix user reaches nothing of the human's: not the gateway's
socket (so no approve, deny, answer, pair, phone dial or anything else on it), and not the
config, the deployment key or the console's token, even where their folders let it pass. (The
console it is refused by who connects: tests/test_console_peers.py.)

The user is `nobody`, and the files' and socket's own modes are what refuse it: each sits in a
folder anyone may pass through."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, SecurityConfig
from agentcomms.console_token import console_token
from agentcomms.trust import DeploymentKey
from tests.support.home import write_config
from tests.support.own_user import system_python
from tests.support.stack import register, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

pytestmark = pytest.mark.skipif(
    os.getuid() != 0, reason="starting another user's process needs root"
)

# What the other user tries: each human door on the socket, and each secret in the home.
TRIES = """
import json, socket, sys
sock_path, *files = sys.argv[1:]
tried = {}
for method, params in [("approval_decide", {"id": "K7QF", "behavior": "allow"}),
                       ("pair", {"code": "123456", "confirm": True}), ("ping", {})]:
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(sock_path)
            s.sendall(json.dumps({"id": 1, "method": method, "params": params}).encode() + b"\\n")
            tried[method] = s.recv(65536).decode()
    except OSError as exc:
        tried[method] = type(exc).__name__
for path in files:
    try:
        with open(path) as f:
            tried[path] = f.read()
    except OSError as exc:
        tried[path] = type(exc).__name__
print(json.dumps(tried))
"""


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder any user may pass through (the tests' own temporary folders are root's only)."""
    folder = Path(tempfile.mkdtemp(prefix="agentcomms-other-user-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder)


async def test_another_user_reaches_neither_the_socket_nor_the_homes_secrets(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    open_folder: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = open_folder / "home"
    monkeypatch.setenv("AGENTCOMMS_HOME", str(home))
    config = write_config(home, {"server": {"socket_path": str(open_folder / "daemon.sock")}})
    home.chmod(0o711)  # passable, so each file's own mode is what refuses
    console_token()
    DeploymentKey.load(SecurityConfig())
    secrets = [config, home / "console.token", home / "deployment.key"]

    async with running_stack(
        temporal_env.client, tmp_path, with_worker=False, socket_path=open_folder / "daemon.sock"
    ) as stack:
        assert (await stack.call("ping"))["pong"] is True  # the human's own user is served
        python = system_python()
        tried = await asyncio.to_thread(
            subprocess.run,
            ["runuser", "-u", "nobody", "--", python, "-c", TRIES,
             str(stack.cfg.server.socket()), *map(str, secrets)],
            capture_output=True, text=True, cwd="/", timeout=60,
        )  # fmt: skip
    assert tried.returncode == 0, tried.stderr
    assert json.loads(tried.stdout) == dict.fromkeys(
        ["approval_decide", "pair", "ping", *map(str, secrets)], "PermissionError"
    )


# A hook of an agent that runs as its own user, on the hooks' own door: its report, and what it
# may not ask there.
HOOK_ASKS = """
import json, socket, sys
door, other = sys.argv[1:3]
report = {"kind": "claude-code", "event": "Stop", "at_ns": 1}
asks = [("agent_hook", report), ("agent_hook", dict(report, agent_id=other)),
        ("approval_decide", {"id": "K7QF", "behavior": "allow"}), ("pair", {"code": "123456"})]
for method, params in asks:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(door)
        s.sendall(json.dumps({"id": 1, "method": method, "params": params}).encode() + b"\\n")
        print(s.makefile().readline().strip())
"""


async def test_an_agent_of_its_own_user_reports_through_the_hooks_door_for_its_pane_only(
    temporal_env: WorkflowEnvironment, tmp_path: Path, open_folder: Path, tmux: Tmux
) -> None:
    door = open_folder / "hooks.sock"

    def configure(cfg: Config) -> Config:
        server = cfg.server.model_copy(update={"hooks_socket_path": door})
        return cfg.model_copy(update={"server": server})

    python = system_python()
    out = open_folder / "out"
    out.mkdir()
    out.chmod(0o777)  # where the agent's user writes what it was told
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        agent, other = stack.agent_id(), stack.agent_id("other")
        target = tmux.new_session("agent", "runuser -u nobody -- sh")
        await register(stack, agent, tmux, target)
        await register(stack, other, tmux, tmux.new_session("other"))
        command = f"{python} -c {shlex.quote(HOOK_ASKS)} {door} {other} > {out}/in-pane"
        tmux.run("send-keys", "-t", target, "-l", f"cd /; {command}; touch {out}/done")
        tmux.run("send-keys", "-t", target, "Enter")
        await eventually(lambda: (out / "done").exists(), timeout=30)
        # The same user outside every agent's pane.
        outside = await asyncio.to_thread(
            subprocess.run,
            ["runuser", "-u", "nobody", "--", python, "-c", HOOK_ASKS, str(door), other],
            capture_output=True, text=True, cwd="/", timeout=60,
        )  # fmt: skip

    reported, for_other, decided, paired = [
        json.loads(line) for line in (out / "in-pane").read_text().splitlines()
    ]
    assert reported["result"] == {"agent_id": agent, "event": "Stop"}, reported
    assert f"names agent {other!r}" in for_other["error"]["message"], for_other
    assert "decides for the human" in decided["error"]["message"], decided
    assert "not served on the hooks' door" in paired["error"]["message"], paired
    refused = [json.loads(line)["error"]["message"] for line in outside.stdout.splitlines()]
    assert len(refused) == 4 and "runs in none" in refused[0], (outside.stdout, outside.stderr)
