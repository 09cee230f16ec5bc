"""Logging for the long-running processes: plain lines on stderr (and a file when configured)."""

from __future__ import annotations

import logging
import re

from agentcomms.config import LoggingConfig

# The Telegram Bot API takes the bot token in the URL path (/bot123456:ABC…/sendMessage), and
# HTTP clients log URLs: no line leaves this process with one in it.
_BOT_TOKEN_IN_URL = re.compile(r"(/bot)\d+:[A-Za-z0-9_-]+")


class RedactSecrets(logging.Filter):
    """Masks credentials that libraries put in what they log (a bot token in a URL)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = _BOT_TOKEN_IN_URL.sub(r"\1***", message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def setup_logging(cfg: LoggingConfig) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if cfg.file:
        cfg.file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(cfg.file))
    for handler in handlers:
        handler.addFilter(RedactSecrets())
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
