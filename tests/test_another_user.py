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
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import SecurityConfig
from agentcomms.console_token import console_token
from agentcomms.trust import DeploymentKey
from tests.support.home import write_config
from tests.support.stack import running_stack

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
        python = shutil.which("python3", path="/usr/bin:/bin")
        assert python is not None, "no python3 in /usr/bin or /bin: `apt-get install python3`"
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
