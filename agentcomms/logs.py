"""Logging for the long-running processes: on stderr (and a file when configured), as readable
lines or, with ``logging.format: json``, one JSON object per line for log shippers."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentcomms.config import LoggingConfig
from agentcomms.workflow_ids import agent_of_mailbox

# The Telegram Bot API takes the bot token in the URL path (/bot123456:ABC…/sendMessage), and
# HTTP clients log URLs: no line leaves this process with one in it.
_BOT_TOKEN_IN_URL = re.compile(r"(/bot)\d+:[A-Za-z0-9_-]+")


def redact(text: str) -> str:
    """The text with every credential we know how to spot masked."""
    return _BOT_TOKEN_IN_URL.sub(r"\1***", text)


_EVENT_ID = re.compile(r"\bevt_[0-9A-Za-z_-]{10,60}")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, and where there is one the
    event id, agent id and workflow id (from ``extra=``, the Temporal SDK's workflow and
    activity loggers, or an event id named in the message)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": message,
        }
        temporal = getattr(record, "temporal_workflow", None) or getattr(
            record, "temporal_activity", None
        )
        workflow_id = getattr(record, "workflow_id", None) or (
            temporal.get("workflow_id") if isinstance(temporal, dict) else None
        )
        agent_id = getattr(record, "agent_id", None)
        if agent_id is None and isinstance(workflow_id, str):
            agent_id = agent_of_mailbox(workflow_id)
        event_id = getattr(record, "event_id", None)
        if event_id is None and (found := _EVENT_ID.search(message)):
            event_id = found[0]
        for key, value in (
            ("event_id", event_id),
            ("agent_id", agent_id),
            ("workflow_id", workflow_id),
        ):
            if value is not None:
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        # Tracebacks and extras are redacted too: the filter sees only the message.
        return redact(json.dumps(line, default=str, ensure_ascii=False))


class RedactSecrets(logging.Filter):
    """Masks credentials that libraries put in what they log (a bot token in a URL)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def setup_logging(cfg: LoggingConfig, *, default_file: Path | None = None) -> None:
    """Log to stderr, and to ``logging.file`` (else `default_file`) rotated: a service runs
    for months, and its log must not fill the disk."""
    from logging.handlers import RotatingFileHandler

    from agentcomms.user_service import LOG_BACKUPS, LOG_MAX_BYTES

    handlers: list[logging.Handler] = [logging.StreamHandler()]
    file = cfg.file or default_file
    if file:
        file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(RotatingFileHandler(file, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS))
    for handler in handlers:
        handler.addFilter(RedactSecrets())
        if cfg.format == "json":
            handler.setFormatter(JsonFormatter())
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
    # httpx logs every request at INFO: a Telegram long poll every 25 s, its URL holding the token.
    logging.getLogger("httpx").setLevel(logging.WARNING)
