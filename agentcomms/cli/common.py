"""What every typer command shares: one way to report a user's mistake, one way to print JSON.

The printing itself is :mod:`agentcomms.cli.output`, which the quick commands use without typer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer

from agentcomms.cli import output
from agentcomms.cli.output import message_or_stdin, print_fields, print_json, shown, styled
from agentcomms.errors import AgentcommsError

__all__ = [
    "JsonOption",
    "ask_gateway",
    "console",
    "err_console",
    "fail",
    "message_or_stdin",
    "print_fields",
    "print_json",
    "run_async",
    "shown",
    "styled",
    "user_errors",
]

# Every command that prints a result takes it, and says it the same way.
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]

console = output.stdout()
err_console = output.stderr()


def fail(message: str, *, code: int = 1) -> NoReturn:
    """Print one sentence to stderr and exit non-zero: no traceback for a user's mistake."""
    output.print_error(message)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn an :class:`AgentcommsError` into a one-line message on stderr."""
    try:
        yield
    except AgentcommsError as exc:
        fail(str(exc))


def ask_gateway(method: str, **params: Any) -> Any:
    """One request to the gateway named by the config; its error reply as one line on stderr."""
    return output.ask(method, **params)


def run_async(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a coroutine function to completion, reporting user errors as one line."""
    import asyncio

    with user_errors():
        return asyncio.run(fn(*args, **kwargs))
