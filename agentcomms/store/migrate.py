"""Bringing a database's tables up to date with Alembic, programmatically (no alembic.ini)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from agentcomms.errors import DatabaseUnavailable, SchemaOutdated
from agentcomms.store.engine import (
    PG_LOCK_MIGRATIONS,
    create_engine,
    display_url,
    dispose,
    parse_url,
    sqlite_path,
    write_transaction,
)

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str | None:
    """The newest revision this version of agentcomms knows."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


@dataclass(frozen=True)
class SchemaStatus:
    url: str  # password hidden
    current: str | None  # None: no agentcomms tables yet
    head: str | None

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head


@asynccontextmanager
async def database_errors(url: str) -> AsyncIterator[None]:
    """Turn "cannot connect" and driver failures into one sentence naming the (redacted) URL."""
    try:
        yield
    except (OSError, SQLAlchemyError) as exc:
        raise DatabaseUnavailable(
            f"Cannot use the database at {display_url(url)}: {exc}. "
            "Check database.url in the config (or AGENTCOMMS_TEST_DATABASE_URL in tests)."
        ) from exc


# Alembic keeps the running migration in module globals (``alembic.context``, ``alembic.op``), so
# two upgrades interleaving in one event loop, even of different databases, corrupt each other.
# One lock per loop: an asyncio.Lock belongs to the loop that first waits on it.
_alembic_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


def _alembic_lock() -> asyncio.Lock:
    return _alembic_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())


def _upgrade(connection: Connection) -> None:
    command.upgrade(alembic_config(connection), "head")


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def upgrade_engine(engine: AsyncEngine) -> None:
    """Apply every missing revision in one transaction; a no-op when already at head.

    Processes that start together (worker, gateway) may both upgrade: the first holds a lock
    (SQLite's write lock, a PostgreSQL advisory lock) and the others then find nothing to do.
    """
    async with _alembic_lock(), write_transaction(engine) as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(:cls, 0)"), {"cls": PG_LOCK_MIGRATIONS}
            )
        await conn.run_sync(_upgrade)


async def engine_schema_status(engine: AsyncEngine) -> SchemaStatus:
    async with engine.connect() as conn:
        current = await conn.run_sync(_current)
    return SchemaStatus(url=display_url(engine.url), current=current, head=head_revision())


async def ensure_schema_current(engine: AsyncEngine) -> None:
    status = await engine_schema_status(engine)
    if not status.up_to_date:
        raise SchemaOutdated(
            f"The database at {status.url} is at revision {status.current or 'none'}, "
            f"this agentcomms expects {status.head}. Run `agentcomms db upgrade`."
        )


async def upgrade_database(url: str) -> None:
    """Create or update the agentcomms tables at ``url`` (sqlite+aiosqlite or postgresql+asyncpg)."""
    engine = create_engine(url)
    try:
        async with database_errors(url):
            await upgrade_engine(engine)
    finally:
        await dispose(engine)


async def schema_status(url: str) -> SchemaStatus:
    """Which revision the database at ``url`` is at, and which one this code expects.

    Only looks: a SQLite file that does not exist yet is reported as such, not created.
    """
    path = sqlite_path(parse_url(url))
    if path is not None and not path.exists():
        return SchemaStatus(url=display_url(url), current=None, head=head_revision())
    engine = create_engine(url)
    try:
        async with database_errors(url):
            return await engine_schema_status(engine)
    finally:
        await dispose(engine)
