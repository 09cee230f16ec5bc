"""``agentcomms db upgrade | info | rebuild``: the projection database's tables, and its rows rebuilt
from Temporal."""

from __future__ import annotations

from typing import Annotated, Any

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


@db_app.command("rebuild")
def rebuild(
    url: UrlOption = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Rebuild the projection from Temporal, after its database was lost or deleted.

    Reads every mailbox and outbox Temporal still keeps and writes what they
    hold: each agent with its pane, status and state; its messages in and to
    chats with what became of them (delivered, failed, waiting); when its
    newest pane was signed; the phone calls, ended or still up; and the chats
    the config maps. Open approvals are read from Temporal itself.

    History lasts as long as the Temporal namespace keeps closed runs (24 hours
    on the embedded dev server; a mailbox's running run is kept whole). Lost for
    good: messages older than that, the agents' messages to your terminal
    (`cli:local`, kept only here), paired chat senders (they pair again), and
    messages refused before they reached a mailbox.

    Stop the gateway first (`agentcomms up` with its embedded Temporal
    rebuilds by itself when it finds the database empty or missing). Safe to
    run again: it adds what is missing.
    """
    target = _database_url(url)
    rebuilt = run_async(_rebuild, target)
    if json_output:
        print_json(
            {
                "database": rebuilt["database"],
                "agents": rebuilt["agents"],
                "events": rebuilt["events"],
                "calls": rebuilt["calls"],
                "channels": rebuilt["channels"],
                "read_from_histories_only": rebuilt["unanswered"],
            }
        )
        return
    console.print(
        f"Rebuilt {rebuilt['database']} from Temporal: {len(rebuilt['agents'])} agents, "
        f"{rebuilt['events']} events, {rebuilt['calls']} calls, "
        f"{rebuilt['channels']} configured channels.",
        soft_wrap=True,
    )
    if rebuilt["unanswered"]:
        console.print(
            "These mailboxes did not answer (is their host's worker running?) and were read "
            f"from their histories alone: {', '.join(rebuilt['unanswered'])}.",
            soft_wrap=True,
        )


async def _rebuild(url: str) -> dict[str, Any]:
    from agentcomms.store import Store
    from agentcomms.store.engine import display_url
    from agentcomms.temporal import connect
    from gateway.rebuild import rebuild_projection

    cfg = load_config()
    client = await connect(cfg.temporal)
    store = await Store.open(url)
    try:
        rebuilt = await rebuild_projection(client, store, cfg)
    finally:
        await store.close()
    return {
        "database": display_url(url),
        "agents": rebuilt.agents,
        "events": rebuilt.events,
        "calls": rebuilt.calls,
        "channels": rebuilt.channels,
        "unanswered": rebuilt.unanswered,
    }
