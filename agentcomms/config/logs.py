"""The ``logging`` section: how loud the long-running processes are, and where they write."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from agentcomms.config.section import Section

_FILE = (
    "Log file, rotated at 10 MB (five kept); unset: `up` logs to <home>/logs/agentcomms.log "
    "(what `agentcomms service logs` reads), other processes to stderr only"
)


class LoggingConfig(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    file: Path | None = Field(None, description=_FILE)
    format: Literal["text", "json"] = Field(
        default="text",
        description="text: one readable line per record; json: one JSON object per line (event, "
        "agent and workflow ids as fields) for log shippers",
    )

    @field_validator("level", mode="before")
    @classmethod
    def _any_case(cls, value: Any) -> Any:
        # "info" is what people type; keep anything else as written so the error quotes it.
        if isinstance(value, str) and value.upper() in typing.get_args(
            cls.model_fields["level"].annotation
        ):
            return value.upper()
        return value
