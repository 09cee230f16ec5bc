"""The SQL projection of what Temporal knows: events, agents, channels, calls.

Temporal's history is the source of truth; this store answers queries fast (check_messages,
chat history, ``agentcomms events``). SQLite by default, PostgreSQL when several hosts share it.
"""

from __future__ import annotations

from agentcomms.errors import DatabaseUnavailable, EventNotFound, SchemaOutdated, StoreError
from agentcomms.store.engine import PROJECTION_UNAVAILABLE
from agentcomms.store.migrate import SchemaStatus, head_revision, schema_status, upgrade_database
from agentcomms.store.read_cursors import MESSAGE_TYPES
from agentcomms.store.store import Store

__all__ = [
    "MESSAGE_TYPES",
    "PROJECTION_UNAVAILABLE",
    "DatabaseUnavailable",
    "EventNotFound",
    "SchemaOutdated",
    "SchemaStatus",
    "Store",
    "StoreError",
    "head_revision",
    "schema_status",
    "upgrade_database",
]
