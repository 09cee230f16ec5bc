"""The typer app behind `agentcomms`: every command, its arguments and its --help.

Each concern's commands live in a module of their own, ``agentcomms/cli/<concern>_cmd.py``, which
registers them on :data:`app` when imported; every such module is imported here, in name order
(the order `agentcomms --help` lists them in).
"""

from __future__ import annotations

import importlib
import pkgutil

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
    rich_markup_mode="markdown",
)


def _register_commands() -> None:
    package = importlib.import_module("agentcomms.cli")
    for name in sorted(m.name for m in pkgutil.iter_modules(package.__path__)):
        if name.endswith("_cmd"):
            importlib.import_module(f"agentcomms.cli.{name}")


_register_commands()
