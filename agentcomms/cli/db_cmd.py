"""``agentcomms db upgrade | info``: the projection database's tables."""

from __future__ import annotations

from typing import Annotated

import typer

from agentcomms.cli import app
from agentcomms.cli.common import console, print_json, run_async, user_errors
from agentcomms.config import load_config

db_app = typer.Typer(
    name="db",
    no_args_is_help=True,
    help="""Create, update and inspect the projection database.

The projection holds events, agents, channels and calls so that queries
(check_messages, chat history, `agentcomms events`) are fast; Temporal's
history stays the source of truth. By default it is a SQLite file,
~/.agentcomms/agentcomms.db (created 0600); set database.url in the config
(or AGENTCOMMS_DATABASE__URL) to share a PostgreSQL database between hosts,
e.g. postgresql+asyncpg://agentcomms@db.internal/agentcomms.

Every agentcomms process upgrades the tables when it starts, so you rarely
need these commands: use them to prepare a database before a deployment, or
to see which revision it is at.""",
)
app.add_typer(db_app, name="db")

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="SQLAlchemy URL of the database; default database.url from the config",
        show_default=False,
    ),
]


def _database_url(url: str | None) -> str:
    if url:
        return url
    with user_errors():  # a broken config file is one sentence on stderr, not a traceback
        return load_config().database.resolved_url()


@db_app.command("upgrade")
def upgrade(url: UrlOption = None) -> None:
    """Create the tables, or bring them up to this version's revision.

    Safe to run at any time and from several hosts at once: revisions
    already applied are skipped, and concurrent upgrades wait for each other.
    A SQLite file (and its directory) is created when missing.
    """
    from agentcomms.store import schema_status, upgrade_database

    target = _database_url(url)
    run_async(upgrade_database, target)
    status = run_async(schema_status, target)
    console.print(f"Database {status.url} is at revision {status.current}.", soft_wrap=True)


@db_app.command("info")
def info(
    url: UrlOption = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Show which database is used and whether its tables are up to date.

    Exits with status 1 when the tables need `agentcomms db upgrade`.
    """
    from agentcomms.store import schema_status

    status = run_async(schema_status, _database_url(url))
    if json_output:
        print_json(
            {
                "url": status.url,
                "revision": status.current,
                "expected_revision": status.head,
                "up_to_date": status.up_to_date,
            }
        )
    else:
        console.print(f"database:  {status.url}", soft_wrap=True)
        console.print(
            f"revision:  {status.current or 'none (no tables yet)'}",
            soft_wrap=True,
        )
        console.print(f"expected:  {status.head}", soft_wrap=True)
        if not status.up_to_date:
            console.print(
                "Run `agentcomms db upgrade` to bring the tables up to date.", soft_wrap=True
            )
    if not status.up_to_date:
        raise typer.Exit(1)
