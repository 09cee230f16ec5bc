"""Alembic environment, driven only from :mod:`agentcomms.store.migrate`.

There is no alembic.ini: ``migrate.alembic_config`` points Alembic here and hands over an open
connection in ``config.attributes["connection"]``, already inside the transaction that holds the
migration lock.

A new revision: write ``versions/NNNN_<what>.py`` by hand (copy the last one, set ``revision`` and
``down_revision``), then let ``tests/test_store.py::test_migrations_match_schema`` confirm that the
revisions and ``store/schema.py`` agree.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from agentcomms.store.schema import metadata

connection: Connection | None = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("Run migrations through agentcomms.store.migrate.upgrade_database().")

context.configure(
    connection=connection,
    target_metadata=metadata,
    # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
