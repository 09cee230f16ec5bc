"""What one check of `agentcomms doctor` found, and for a problem what to do."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    # Worth knowing, not broken: shown with "!" and its fix, and doctor still exits 0.
    warn: bool = False

    def as_json(self) -> dict[str, Any]:
        return asdict(self)
