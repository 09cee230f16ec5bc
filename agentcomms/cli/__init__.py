"""The ``agentcomms`` command. Each concern's commands live in a module of their own."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="agentcomms",
    help=(
        "Durable two-way communication between AI coding agents and their humans.\n\n"
        "Start everything on this machine with `agentcomms up`; see `agentcomms COMMAND --help`."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Importing a module registers its commands on `app`.
from agentcomms.cli import agents_cmd, config_cmd, db_cmd, mcp_cmd, run_cmd  # noqa: E402, F401


def main() -> None:
    app()
