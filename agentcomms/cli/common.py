"""What every command shares: one way to report a user's mistake, one way to print JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from agentcomms.errors import AgentcommsError
from agentcomms.framing import strip_unsafe
from agentcomms.models import MAX_MESSAGE_CHARS

# No markup: what we print holds text from agents, chats and users, and "[/]" in a message must
# print as itself, not raise MarkupError. Styling is explicit (rich Text), see `styled`.
console = Console(markup=False, highlight=False)
err_console = Console(stderr=True, markup=False, highlight=False)


def shown(text: str) -> str:
    """Text from outside, fit for the human's terminal: no escape sequences or control
    characters (an agent's message must not retitle the window or write the clipboard)."""
    return strip_unsafe(text)


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line of plain strings and (text, style) pairs, e.g. styled(("error:", "bold red"), " x")."""
    return Text.assemble(*parts)


def fail(message: str, *, code: int = 1) -> NoReturn:
    """Print one sentence to stderr and exit non-zero: no traceback for a user's mistake."""
    err_console.print(styled(("error:", "bold red"), " ", shown(message)), soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn an :class:`AgentcommsError` into a one-line message on stderr."""
    try:
        yield
    except AgentcommsError as exc:
        fail(str(exc))


def message_or_stdin(message: str | None, example: str) -> str:
    """The message argument, or, when it is left out, the text piped into the command.

    One trailing newline (from `echo` or a file) is dropped: it would press Enter twice.
    """
    if message is not None:
        return message
    if sys.stdin.isatty():
        fail(f"no message: give it as an argument, or pipe it in ({example})")
    text = sys.stdin.read(MAX_MESSAGE_CHARS + 2).removesuffix("\n")
    if len(text) > MAX_MESSAGE_CHARS:
        fail(f"the message on stdin is longer than {MAX_MESSAGE_CHARS:,} characters")
    if not text.strip():
        fail("the message on stdin is empty")
    return text


def print_fields(rows: list[tuple[str, str | None]]) -> None:
    """Label/value lines, never truncated (paths must survive a narrow or piped terminal)."""
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        if value is not None:
            sys.stdout.write(f"  {label:<{width}}  {value}\n")
    sys.stdout.flush()


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def ask_gateway(method: str, **params: Any) -> Any:
    """One request to the gateway named by the config; its error reply as one line on stderr."""
    from agentcomms.client import call
    from agentcomms.config import load_config

    with user_errors():
        socket = load_config().server.socket()
    return run_async(call, socket, method, **params)


def run_async(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a coroutine function to completion, reporting user errors as one line."""
    import asyncio

    with user_errors():
        return asyncio.run(fn(*args, **kwargs))
