"""Creating the async engine, with the SQLite settings a shared, durable file needs."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from agentcomms.errors import AgentcommsError, DatabaseUnavailable

# What a read or write raises when the projection cannot answer now ("database is locked", a
# dropped connection). Where Temporal holds the truth, callers log it and carry on.
PROJECTION_UNAVAILABLE = (AgentcommsError, SQLAlchemyError, OSError)

SQLITE_BUSY_TIMEOUT_MS = 10_000
# pg_advisory_xact_lock(class, object) classes, "acms", "acmt" and "acmu" in ASCII, so locks that other
# applications take on a shared server cannot collide with ours.
PG_LOCK_MIGRATIONS = 0x61636D73
PG_LOCK_AGENT_EVENTS = 0x61636D74
PG_LOCK_CHANNEL_EVENTS = 0x61636D75
# Execution option that makes a SQLite transaction take the write lock at BEGIN.
_IMMEDIATE = "agentcomms_sqlite_immediate"


def parse_url(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError as exc:
        raise DatabaseUnavailable(
            f"Database URL {url!r} is not a SQLAlchemy URL; expected e.g. "
            "sqlite+aiosqlite:///path/agentcomms.db or postgresql+asyncpg://user@host/db."
        ) from exc


def display_url(url: str | URL) -> str:
    """The URL with its password hidden, fit for messages and logs."""
    parsed = url if isinstance(url, URL) else parse_url(url)
    return parsed.render_as_string(hide_password=True)


def sqlite_path(url: URL) -> Path | None:
    """The file of a SQLite URL; None for other databases and in-memory SQLite."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    if url.database.startswith("file:"):  # a URI filename: leave it to SQLite
        return None
    return Path(url.database).expanduser()


def _prepare_sqlite_file(path: Path) -> None:
    """Create the file (and its directory) owner-only before SQLite creates it world-readable."""
    if path.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        # An empty file is a valid, empty SQLite database. SQLite gives -wal and -shm the same mode.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:  # another process won the race; its file is as good as ours
        pass


def _enable_wal(cursor: Any) -> None:
    """WAL: readers never block the writer, and a crash cannot tear a committed write.

    Converting a new file to WAL needs an exclusive lock, and when several processes open the
    new file at once SQLite may refuse it at once ("database is locked") without consulting
    busy_timeout. Only that first conversion can race, so a short retry here is enough; the
    brief blocking sleep happens only while the file is being created.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:  # aiosqlite raises the stdlib error
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


# Every aiosqlite connection each engine opened, for `dispose`.
_OPENED: weakref.WeakKeyDictionary[Engine, weakref.WeakSet[Any]] = weakref.WeakKeyDictionary()


async def dispose(engine: AsyncEngine) -> None:
    """Close every connection of ``engine``: its pool's, and those its pool's disposal leaves
    open, checked out at the time by a read a cancelled task still held. The pool no longer
    knows those, so nothing else would close them, and each would close itself only when
    collected, in whatever code runs then (aiosqlite warns there; its thread lives till then)."""
    await engine.dispose()
    for connection in list(_OPENED.get(engine.sync_engine, ())):
        if connection._connection is not None:  # aiosqlite's own mark of an open connection
            with contextlib.suppress(Exception):  # a read under way ends with an error, as it must
                await connection.close()


def _configure_sqlite(sync_engine: Engine) -> None:
    opened = _OPENED.setdefault(sync_engine, weakref.WeakSet())

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # The async engine's (aiosqlite); the writer's own sqlite3 ones close in its thread.
        if (driver := getattr(dbapi_connection, "driver_connection", None)) is not None:
            opened.add(driver)
        # Take BEGIN away from the sqlite3 module (it skips it before SELECT and DDL, which breaks
        # repeatable reads and transactional migrations); `_on_begin` emits it instead.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            # Worker, gateway and CLI share the file: wait for a lock rather than fail.
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            _enable_wal(cursor)
            cursor.execute("PRAGMA synchronous=NORMAL")  # durable enough with WAL, much faster
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # A write transaction that starts by reading must hold the write lock from the start:
        # upgrading a WAL read snapshot to a write fails at once (SQLITE_BUSY), busy_timeout or not.
        immediate = connection.get_execution_options().get(_IMMEDIATE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def create_engine(url: str) -> AsyncEngine:
    """An async engine for ``url`` (sqlite+aiosqlite or postgresql+asyncpg).

    For a SQLite file: the directory and an owner-only (0600) file are created when missing, and
    every connection runs in WAL mode with foreign keys on and a busy timeout.
    """
    parsed = parse_url(url)
    path = sqlite_path(parsed)
    if path is not None:
        try:
            _prepare_sqlite_file(path)
        except OSError as exc:
            raise DatabaseUnavailable(f"Cannot create the SQLite database {path}: {exc}.") from exc
    try:
        engine = create_async_engine(
            parsed,
            # The gateway lives for days; a PostgreSQL restart must not leave it with dead sockets.
            pool_pre_ping=parsed.get_backend_name() == "postgresql",
        )
    except (ArgumentError, ImportError) as exc:
        raise DatabaseUnavailable(
            f"Cannot use database URL {display_url(parsed)}: {exc}. "
            "Use sqlite+aiosqlite:///… or postgresql+asyncpg://…."
        ) from exc
    if parsed.get_backend_name() == "sqlite":
        _configure_sqlite(engine.sync_engine)
    return engine


def create_sqlite_writer(url: str) -> Engine | None:
    """A synchronous engine (the stdlib driver) on the same SQLite file, for writes that run
    whole in one thread: None for other databases and in-memory SQLite, written to through the
    async engine instead.

    The async driver hops to its own thread and back for every step of a transaction (nine for
    one insert: connect, BEGIN, the statement, its rows, COMMIT, the pool's reset), which cost
    1.13 ms of CPU for a one-row insert against 0.32 ms for the same transaction run whole in a
    thread (measured on 2 cores, 2026-11-30). The gateway and the delivery write once per message.
    """
    parsed = parse_url(url)
    if sqlite_path(parsed) is None:
        return None
    writer = create_sync_engine(parsed.set(drivername="sqlite+pysqlite"))
    _configure_sqlite(writer)
    # Every transaction of this engine writes: each takes the write lock at BEGIN.
    return writer.execution_options(**{_IMMEDIATE: True})


@asynccontextmanager
async def write_transaction(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A transaction that will write: on SQLite it holds the write lock from its first statement."""
    async with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn = await conn.execution_options(**{_IMMEDIATE: True})
        async with conn.begin():
            yield conn
