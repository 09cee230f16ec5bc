"""A private agentcomms home for each test, and config files in it as `config init` leaves them."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.databases import PG_URL_ENV

if TYPE_CHECKING:
    from tests.support.stack import Stack


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private AGENTCOMMS_HOME; no AGENTCOMMS_* variable from the outside leaks in."""
    return _private(tmp_path, monkeypatch)


@contextmanager
def module_home(tmp_path: Path) -> Iterator[Path]:
    """The same for a module's shared fixture (a module-scoped agent whose hooks post with the
    token in it), undone when the module is done."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _private(tmp_path, monkeypatch)


def _private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
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


def cli_home(tmp_path: Path, stack: Stack) -> Path:
    """A CLI home whose config names the stack's socket, Temporal queue and projection."""
    home = tmp_path / "cli-home"
    write_config(
        home,
        {
            "server": {"socket_path": str(stack.cfg.server.socket())},
            "temporal": {
                "address": stack.cfg.temporal.address,
                "task_queue": stack.cfg.temporal.task_queue,
            },
            "database": {"url": stack.cfg.database.url},
        },
    )
    return home


def mode(path: Path) -> int:
    """A file's permission bits (0o600 for a config file as `config init` leaves it)."""
    return stat.S_IMODE(path.stat().st_mode)
