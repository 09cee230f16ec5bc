"""Shared fixtures: a private agentcomms home, a private tmux server, real databases, and the
fakes of providers that more than one test module speaks to.

Temporal fixtures live in ``tests/temporal_fixtures.py`` and are re-exported here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.deepgram import FakeDeepgram
from tests.temporal_fixtures import *  # noqa: F403  (session-scoped Temporal environments)

PG_URL_ENV = "AGENTCOMMS_TEST_DATABASE_URL"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private AGENTCOMMS_HOME; no AGENTCOMMS_* variable from the outside leaks in."""
    for name in list(os.environ):
        if name.startswith(("AGENTCOMMS_", "AGENTCALL_")) and name != PG_URL_ENV:
            monkeypatch.delenv(name)
    path = tmp_path / "agentcomms-home"
    monkeypatch.setenv("AGENTCOMMS_HOME", str(path))
    return path


def write_config(home: Path, data: dict[str, Any] | str) -> Path:
    """A config file in a private home, as `config init` leaves it (0700 dir, 0600 file)."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = home / "config.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    path.chmod(0o600)
    return path


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


def _database_params() -> list[str]:
    params = ["sqlite"]
    if os.environ.get(PG_URL_ENV):
        params.append("postgresql")
    return params


@pytest.fixture(params=_database_params())
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A real, empty database: a SQLite file, and PostgreSQL when AGENTCOMMS_TEST_DATABASE_URL is set.

    Each PostgreSQL test gets its own freshly created database so tests cannot see each other's rows.
    """
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'agentcomms.db'}"
        return
    from tests.pg import temporary_database

    with temporary_database(os.environ[PG_URL_ENV]) as url:
        yield url


@pytest.fixture
async def deepgram() -> AsyncIterator[FakeDeepgram]:
    """Deepgram's speech API on a local port (speech calls and voice notes both use it)."""
    fake = FakeDeepgram()
    async with fake.server:
        yield fake
