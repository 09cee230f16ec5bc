"""Between pydantic models and table rows, in both directions."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy.engine import Result, Row

from agentcomms.models import Agent, Event

M = TypeVar("M", bound=BaseModel)

# The columns of an event row and of an agent row, as the driver connection binds them.
EVENT_COLUMNS = tuple(Event.model_fields)
AGENT_COLUMNS = (*Agent.model_fields, "registered_at")


class ChatSender(BaseModel):
    """A chat sender admitted to reach agents (by pairing), or asked to pair (``code`` set)."""

    provider: str
    sender_id: str
    sender_name: str | None = None
    chat_id: str | None = None
    admitted_at: datetime | None = None
    revoked_at: datetime | None = None
    code: str | None = None  # a pending pairing code
    expires_at: datetime | None = None
    created_at: datetime | None = None  # pending: when the sender first wrote


def row_values(model: BaseModel) -> dict[str, Any]:
    """The column values of a model (field names and column names are the same)."""
    values = model.model_dump()
    if isinstance(model, Event):
        # The payload comes from providers and workflows: plain JSON before the driver sees it.
        plain = model.model_dump(mode="json", include={"payload", "tries"})
        values["payload"] = plain["payload"]
        values["tries"] = plain["tries"]
    return values


def from_row(model: type[M], row: Row[Any]) -> M:
    """A model from a row; columns the model does not have (seq, read_cursor…) are ignored."""
    return model.model_validate(dict(row._mapping))


def from_rows(model: type[M], result: Result[Any]) -> list[M]:
    """Models from every row of a result: its column names read once, not once per row (a
    thousand agents' listing spent more on that than on the models)."""
    keys = list(result.keys())
    return [model.model_validate(dict(zip(keys, row, strict=True))) for row in result]
