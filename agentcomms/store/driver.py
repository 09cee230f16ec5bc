"""The writes made for every message, run on a SQLite file's own driver connection.

The gateway inserts each message it accepts and the delivery settles each message it types: two
transactions per message. Through a SQLAlchemy connection each cost about 0.29 ms of CPU (pool
checkout, the begin event, commit, the pool's reset), against 0.09 ms for the same statement run
on the driver's connection (500 one-row inserts into a SQLite file, one at a time, 2026-12-02).
So these statements are built and compiled by SQLAlchemy once, bound with the processors
SQLAlchemy itself would apply (a row reads back exactly as any other write stores it), and run
on one connection the writer thread keeps. Other writes, and PostgreSQL, go through SQLAlchemy.
The read made before every delivery (whether its registration is still the agent's newest) runs
the same way, as a lone SELECT on a reader thread's own connection: building and running it
through SQLAlchemy took about a quarter of the delivery activity's time (py-spy, 2026-12-03).
An agent's ``check_messages`` likewise reads its unread messages on the reader's connection and
moves its read cursor on the writer's: through the async driver the read alone took eight thread
hops, about 1 ms of the gateway's answer (``bench/bench_mcp.py``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import PoolProxiedConnection

T = TypeVar("T")


class DriverStatement:
    """A statement compiled once for the writer's dialect, with how to bind a row to it."""

    def __init__(self, statement: Any, engine: Engine, keys: Iterable[str]) -> None:
        dialect = engine.dialect
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))
        self.sql: str = compiled.string
        # Each parameter in order: its name, the value a literal in the statement carries (the
        # WHERE of an upsert), and the dialect's processor for its type (timestamps, JSON).
        self._binds = [
            (
                name,
                compiled.binds[name].value,
                compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect),
            )
            for name in compiled.positiontup or ()
        ]
        # How the dialect reads each selected column back (a timestamp from SQLite's text).
        selected: Iterable[Any] = (
            statement.selected_columns if isinstance(statement, Select) else ()
        )
        selected = list(selected)
        self._results = [
            column.type.dialect_impl(dialect).result_processor(dialect, None) for column in selected
        ]
        self._names = [column.key for column in selected]

    def parameters(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        bound = []
        for name, literal, process in self._binds:
            value = row.get(name, literal)
            bound.append(value if process is None or value is None else process(value))
        return tuple(bound)

    def run(self, cursor: sqlite3.Cursor, rows: Iterable[Mapping[str, Any]]) -> list[Any]:
        """Run the statement once per row, in order; the rows it returned (RETURNING)."""
        returned: list[Any] = []
        for row in rows:
            returned.extend(cursor.execute(self.sql, self.parameters(row)))
        return returned

    def scalar(self, cursor: sqlite3.Cursor, row: Mapping[str, Any]) -> Any:
        """The first column of the first row the query finds, read as SQLAlchemy reads it
        (None when it finds none)."""
        found = cursor.execute(self.sql, self.parameters(row)).fetchone()
        if found is None or found[0] is None:
            return None
        process = self._results[0]
        return found[0] if process is None else process(found[0])

    def rows(self, cursor: sqlite3.Cursor, row: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Every row the query finds, each as its columns' values read as SQLAlchemy reads them."""
        found = cursor.execute(self.sql, self.parameters(row)).fetchall()
        read = list(zip(self._names, self._results, strict=True))
        return [
            {
                name: value if process is None or value is None else process(value)
                for (name, process), value in zip(read, values, strict=True)
            }
            for values in found
        ]


class DriverConnection:
    """One thread's own connection to the SQLite file (the writer's, or the reader's), kept
    between transactions. Used only from that thread."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._held: PoolProxiedConnection | None = None

    def transact(self, body: Callable[[sqlite3.Cursor], T]) -> T:
        """Run ``body`` in one write transaction (holding the write lock from BEGIN); a driver
        error is raised as SQLAlchemy's (``database is locked`` stays an OperationalError), and
        the connection that met it is not kept."""
        return self._run(body, write=True)

    def read(self, body: Callable[[sqlite3.Cursor], T]) -> T:
        """Run ``body``, one SELECT, in the read transaction SQLite gives a lone statement: a
        WAL snapshot that takes no lock, so a write held by another process (the gateway's,
        the CLI's) does not hold it up."""
        return self._run(body, write=False)

    def _run(self, body: Callable[[sqlite3.Cursor], T], *, write: bool) -> T:
        if self._held is None:
            self._held = self._engine.raw_connection()  # configured as any: WAL, busy timeout
        connection = self._held.driver_connection
        assert isinstance(connection, sqlite3.Connection)
        cursor = connection.cursor()
        try:
            if write:
                cursor.execute("BEGIN IMMEDIATE")
            result = body(cursor)
            if write:
                cursor.execute("COMMIT")
        except BaseException as exc:
            cursor.close()
            self.close(discard=True)
            if isinstance(exc, sqlite3.Error):
                raise DBAPIError.instance(None, None, exc, sqlite3.Error) from exc
            raise
        cursor.close()
        return result

    def close(self, *, discard: bool = False) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        if discard:
            held.invalidate()  # rolls back what it began, and closes it
        else:
            held.close()  # back to the engine's pool, which the store disposes of
