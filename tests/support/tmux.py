"""A private tmux server per test, and the panes tests type into."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


class Tmux:
    """A private tmux server on a socket in a temporary directory."""

    def __init__(self, socket: Path) -> None:
        self.socket = str(socket)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-S", self.socket, *args], capture_output=True, text=True, check=check
        )

    def new_session(self, name: str, command: str | None = None) -> str:
        """Start a detached session (`sh`, or `command`); return its first pane's target.

        Plain `sh`, not the login shell: a user's rc files (pyenv rehash locks, prompts) make
        start-up slow or hang, and tests must not depend on them.
        """
        self.run("new-session", "-d", "-s", name, "-x", "200", "-y", "50", command or "sh")
        return f"{name}:0.0"

    def capture(self, target: str) -> str:
        """The pane's visible text, joined lines, trailing blanks trimmed."""
        out = self.run("capture-pane", "-p", "-J", "-t", target).stdout
        return out.rstrip("\n")

    def kill_session(self, name: str) -> None:
        self.run("kill-session", "-t", name, check=False)


@pytest.fixture(scope="session")
def tmux_socket_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed: `apt-get install tmux` (the tests need a real tmux)")
    return tmp_path_factory.mktemp("tmux")


@pytest.fixture
def tmux(tmux_socket_dir: Path) -> Iterator[Tmux]:
    """A fresh private tmux server per test; killed afterwards."""
    server = Tmux(tmux_socket_dir / f"t-{uuid.uuid4().hex[:8]}")
    yield server
    server.run("kill-server", check=False)
