"""The ``agentcomms`` command. Each concern's commands live in a module of their own."""

from __future__ import annotations

import logging
import os
import sys

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

# Importing a module registers its commands on `app`.
from agentcomms.cli import (  # noqa: E402, F401
    agents_cmd,
    calls_cmd,
    chat_cmd,
    codec_cmd,
    config_cmd,
    db_cmd,
    hook_cmd,
    install_cmd,
    mcp_cmd,
    ops_cmd,
    run_cmd,
)


def main() -> None:
    try:
        app()
        code = 0
    except SystemExit as exc:  # click ends every command, successful or not, with SystemExit
        code = _exit_status(exc.code)
    _exit_skipping_finalization(code)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # what sys.exit("message") would have printed
    return 1


def _exit_skipping_finalization(code: int) -> None:
    """Flush what we wrote, then leave without interpreter finalization.

    The Temporal client's Rust runtime keeps threads that may call into Python while the
    interpreter finalizes, which aborts a finished command with "Fatal Python error:
    PyGILState_Release" and exit status 134 (temporalio/sdk-python#300; a third of
    `agentcomms status` runs here). Everything this process owns (dev server, sockets, state
    file, database connections) has been closed by the command itself before this point.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)
