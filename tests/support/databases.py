"""Real, empty databases for the projection's tests: a SQLite file, and PostgreSQL too when
``AGENTCOMMS_TEST_DATABASE_URL`` names a server and an administrative database, e.g.
``postgresql+asyncpg://postgres@127.0.0.1:5432/postgres``; each test gets a database of its own
on that server, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest
from sqlalchemy.engine import URL, make_url

from agentcomms.store import Store

PG_URL_ENV = "AGENTCOMMS_TEST_DATABASE_URL"

T = TypeVar("T")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    # The fixture is synchronous but may be set up while pytest-asyncio's loop exists in this
    # thread: a private thread gets a private event loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _asyncpg_dsn(url: URL) -> str:
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


async def _execute(admin: URL, sql: str) -> None:
    conn = await asyncpg.connect(_asyncpg_dsn(admin))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextmanager
def temporary_database(admin_url: str) -> Iterator[str]:
    """Create a uniquely named database; yield its ``postgresql+asyncpg://`` URL; drop it."""
    admin = make_url(admin_url)
    name = f"agentcomms_test_{uuid.uuid4().hex[:12]}"
    _run(_execute(admin, f'CREATE DATABASE "{name}"'))
    try:
        yield admin.set(drivername="postgresql+asyncpg", database=name).render_as_string(
            hide_password=False
        )
    finally:
        # FORCE: a connection a failed test leaked must not keep the database alive.
        _run(_execute(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _database_params() -> list[str]:
    params = ["sqlite"]
    if os.environ.get(PG_URL_ENV):
        params.append("postgresql")
    return params


@pytest.fixture(params=_database_params())
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A real, empty database: a SQLite file, and PostgreSQL when AGENTCOMMS_TEST_DATABASE_URL is set.

    Each PostgreSQL test gets its own freshly created database so tests cannot see each other's rows.
    """
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'agentcomms.db'}"
        return
    with temporary_database(os.environ[PG_URL_ENV]) as url:
        yield url


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    """A store on the test's own database, open for the test."""
    opened = await Store.open(database_url)
    yield opened
    await opened.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    """A store on a SQLite file of the test's own, for a test whose subject is not the database
    (`store` runs on PostgreSQL too, when it is set)."""
    opened = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'projection.db'}")
    yield opened
    await opened.close()
