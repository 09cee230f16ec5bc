"""The state file of a running `agentcomms up` (~/.agentcomms/up.json), which `status` reads.

Standard library only, so `agentcomms status` reads it without loading Temporal or SQLAlchemy.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from agentcomms.config.home import agentcomms_home

__all__ = ["clear_state", "read_state", "state_path", "write_state"]


def state_path() -> Path:
    return agentcomms_home() / "up.json"


def write_state(info: dict[str, Any]) -> None:
    from agentcomms.models import utcnow  # pydantic's models: only `up` writes this file

    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info | {"pid": os.getpid(), "started_at": utcnow().isoformat()}, f, indent=2)
    os.replace(tmp, path)


def read_state() -> dict[str, Any] | None:
    """The state file of a running `up`, or None when absent or left by a dead process."""
    try:
        info: dict[str, Any] = json.loads(state_path().read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(int(info["pid"]), 0)
    except (OSError, KeyError, ValueError):
        return None
    return info


def clear_state() -> None:
    with contextlib.suppress(FileNotFoundError):
        state_path().unlink()
