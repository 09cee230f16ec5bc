"""`logging.format: json`: one JSON object per line, with the ids a log shipper indexes, and no
secret in any of it."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentcomms.config import LoggingConfig, load_config
from agentcomms.errors import ConfigError
from agentcomms.logs import setup_logging
from tests.support.home import write_config

TOKEN = "123456:ABCdef_ghi-JKL"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        handler.close()
    root.handlers[:], root.level = handlers, level


def test_json_lines_carry_the_ids_and_no_secret(tmp_path: Path, restore_logging: None) -> None:
    path = tmp_path / "agentcomms.log"
    setup_logging(LoggingConfig(format="json", file=path))
    log = logging.getLogger("gateway.test")
    log.warning(
        "evt_01J00000000000000000000000 accepted; row waits",
        extra={"agent_id": "backend"},
    )
    # As the Temporal SDK's activity logger puts it.
    log.info(
        "typed into dev:0.0",
        extra={"temporal_activity": {"workflow_id": "agent-frontend", "activity_type": "x"}},
    )
    log.info("GET https://api.telegram.org/bot%s/getUpdates", TOKEN)
    try:
        raise RuntimeError(f"POST /bot{TOKEN}/sendMessage failed")
    except RuntimeError:
        log.exception("sending failed")
    for handler in logging.getLogger().handlers:
        handler.flush()
    text = path.read_text()
    assert TOKEN not in text and "/bot***" in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 4  # one object per line, the traceback inside its record
    first, second, third, fourth = lines
    assert first["event_id"] == "evt_01J00000000000000000000000"
    assert first["agent_id"] == "backend" and first["level"] == "WARNING"
    assert first["logger"] == "gateway.test" and "time" in first
    assert second["workflow_id"] == "agent-frontend" and second["agent_id"] == "frontend"
    assert "event_id" not in third and "/bot***/getUpdates" in third["message"]
    assert "RuntimeError" in fourth["exception"]


def test_text_stays_the_default_and_a_wrong_format_is_named(home: Path) -> None:
    assert load_config().logging.format == "text"
    write_config(home, {"logging": {"format": "xml"}})
    with pytest.raises(ConfigError, match=r"logging\.format"):
        load_config()
