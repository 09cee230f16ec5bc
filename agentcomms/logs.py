"""Logging for the long-running processes: plain lines on stderr (and a file when configured)."""

from __future__ import annotations

import logging

from agentcomms.config import LoggingConfig


def setup_logging(cfg: LoggingConfig) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if cfg.file:
        cfg.file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(cfg.file))
    logging.basicConfig(
        level=cfg.level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    # The SDK's "Workflow task not found" under bursts is harmless noise (FIELD-NOTES).
    logging.getLogger("temporalio.worker._workflow").setLevel(logging.ERROR)
    # Migrations announce themselves at INFO on every start; only problems matter here.
    logging.getLogger("alembic").setLevel(logging.WARNING)
