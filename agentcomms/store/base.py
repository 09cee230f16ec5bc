"""The store's connection: one write transaction at a time on SQLite, statements both dialects
speak. :class:`~agentcomms.store.Store` is built on it, table by table."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Self, TypeVar

from sqlalchemy import BigInteger, String, any_, bindparam
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentcomms.models import Event
from agentcomms.store.driver import DriverConnection, DriverStatement
from agentcomms.store.engine import (
    create_engine,
    create_sqlite_writer,
    dispose,
    write_transaction,
)
from agentcomms.store.migrate import database_errors, ensure_schema_current, upgrade_engine
from agentcomms.store.records import EVENT_COLUMNS
from agentcomms.store.schema import Base

T = TypeVar("T")


def check_limit(limit: int) -> None:
    if limit < 0:
        raise ValueError(f"limit must be 0 or more, not {limit}")


class StoreBase:
    """A database and how this process writes to it; the tables' methods are the subclasses'."""

    def __init__(self, engine: AsyncEngine, writer: Engine | None = None) -> None:
        self._engine = engine
        self._dialect = engine.dialect.name
        # SQLite has one writer at a time. Writers of this process queue for one thread (or,
        # without it, one lock), in order, rather than in SQLite's busy-wait, which under 20
        # concurrent writers halved throughput and let single writes wait 0.75 s
        # (bench/bench_mailbox.py); other processes still use the busy timeout.
        self._writer = writer  # see create_sqlite_writer
        self._writer_thread = (
            ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer") if writer else None
        )
        self._sqlite_writes = (
            asyncio.Lock() if self._dialect == "sqlite" and writer is None else None
        )
        # The writes made for every message skip SQLAlchemy's connection (:mod:`.driver`).
        self._driver = DriverConnection(writer) if writer else None
        # The reads made before every delivery get a thread and a connection of their own: queued
        # behind the writer thread, they waited out each write's busy timeout (10 s) whenever
        # another process held the write lock, and the typing waited with them.
        self._reader_thread = (
            ThreadPoolExecutor(1, thread_name_prefix="sqlite-reader") if writer else None
        )
        self._reader = DriverConnection(writer) if writer else None
        # Events the gateway records, until written (the store's queue_event): reads wait.
        self._queued_inserts: list[tuple[Event, asyncio.Future[bool]]] = []
        self._driver_statements: dict[int, DriverStatement] = {}

    @contextlib.asynccontextmanager
    async def _reading(self) -> AsyncIterator[AsyncConnection]:
        """A connection to read events on, once the events queued before now are written."""
        await self._queued_written()
        async with self._engine.connect() as conn:
            yield conn

    async def _queued_written(self) -> None:
        """Return once the events queued before now are written (see queue_event)."""
        if queued := [done for _, done in self._queued_inserts]:
            await asyncio.wait(queued)  # what a write met is its queuer's to hear

    def _on_driver(self, stmt: Any, columns: tuple[str, ...] = EVENT_COLUMNS) -> DriverStatement:
        """One of the statements here, compiled once for the SQLite writer (:mod:`.driver`)."""
        assert self._writer is not None
        compiled = self._driver_statements.get(id(stmt))  # each statement is built once
        if compiled is None:
            compiled = DriverStatement(stmt, self._writer, columns)
            self._driver_statements[id(stmt)] = compiled
        return compiled

    def _among(self, column: Any, values: list[str] | list[int]) -> Any:
        """``column IN values``; on PostgreSQL as one array (``= ANY``): a thousand
        parameters made a statement asyncpg prepared afresh each time (most of a thousand
        agents' listing)."""
        if self._dialect == "postgresql":
            item = BigInteger() if values and isinstance(values[0], int) else String()
            return column == any_(bindparam("among", values, type_=ARRAY(item)))
        return column.in_(values)

    async def _transact(self, body: Callable[[Connection], T]) -> T:
        """Run ``body`` in one write transaction: on a SQLite file whole in the writer thread,
        otherwise on the async engine's connection."""
        if self._writer is not None:
            assert self._writer_thread is not None
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._writer_thread, self._run_in_writer, body)
        async with self._sqlite_writes or contextlib.nullcontext():
            async with write_transaction(self._engine) as conn:
                return await conn.run_sync(body)

    async def _transact_on_driver(self, body: Callable[[sqlite3.Cursor], T]) -> T:
        """Run ``body`` in one write transaction on the writer thread's own driver connection
        (a SQLite file only: check ``self._driver`` first)."""
        assert self._driver is not None and self._writer_thread is not None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer_thread, self._driver.transact, body)

    async def _read_on_driver(self, body: Callable[[sqlite3.Cursor], T]) -> T:
        """Run ``body``, one SELECT on a per-message path, in the reader thread on its own driver
        connection (a SQLite file only: check ``self._reader`` first), taking no lock and never
        queued behind a write. One thread hop, where the async driver takes several: for a
        one-row select 0.13 against 1.1-1.2 ms of CPU (2026-12-03)."""
        assert self._reader is not None and self._reader_thread is not None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader_thread, self._reader.read, body)

    def _run_in_writer(self, body: Callable[[Connection], T]) -> T:
        assert self._writer is not None
        with self._writer.begin() as conn:
            return body(conn)

    @classmethod
    async def open(cls, url: str, *, migrate: bool = True) -> Self:
        """Connect to ``url``; bring its tables up to date, or with ``migrate=False`` only check them.

        Raises ``DatabaseUnavailable`` when the database cannot be reached and ``SchemaOutdated``
        when ``migrate=False`` finds tables of another revision.
        """
        engine = create_engine(url)
        try:
            async with database_errors(url):
                if migrate:
                    await upgrade_engine(engine)
                else:
                    await ensure_schema_current(engine)
        except BaseException:
            await dispose(engine)
            raise
        return cls(engine, create_sqlite_writer(url))

    async def close(self) -> None:
        if self._writer is not None and self._writer_thread is not None:
            # Its connection closes in the thread that opened it.
            loop = asyncio.get_running_loop()
            if self._driver is not None:
                await loop.run_in_executor(self._writer_thread, self._driver.close)
            if self._reader is not None and self._reader_thread is not None:
                await loop.run_in_executor(self._reader_thread, self._reader.close)
                self._reader_thread.shutdown()
            await loop.run_in_executor(self._writer_thread, self._writer.dispose)
            self._writer_thread.shutdown()
        await dispose(self._engine)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    def _insert(self, entity: type[Base]) -> Any:
        # ON CONFLICT is dialect-specific in SQLAlchemy; both dialects spell it the same way.
        dialect = postgresql if self._dialect == "postgresql" else sqlite
        return dialect.insert(entity)

    def _upsert_stmt(
        self,
        entity: type[Base],
        values: Mapping[str, Any],
        *,
        key: str,
        on_insert: Mapping[str, Any] | None = None,
    ) -> Any:
        """Insert ``values`` (plus ``on_insert``), or update the existing row with ``values``."""
        stmt = self._insert(entity).values({**values, **(on_insert or {})})
        return stmt.on_conflict_do_update(
            index_elements=[key],
            set_={name: stmt.excluded[name] for name in values if name != key},
        )

    async def _upsert(
        self,
        entity: type[Base],
        values: Mapping[str, Any],
        *,
        key: str,
        on_insert: Mapping[str, Any] | None = None,
    ) -> None:
        stmt = self._upsert_stmt(entity, values, key=key, on_insert=on_insert)
        await self._transact(lambda conn: conn.execute(stmt))
