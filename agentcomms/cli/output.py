"""How every command speaks: one way to print a user's mistake, text from outside made safe,
JSON for scripts, and one request to the gateway.

Standard library only at import; rich is loaded at the first line printed for a person, so a
quick command (:mod:`agentcomms.cli.quick`) that prints JSON or nothing never loads it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from agentcomms.errors import AgentcommsError
from agentcomms.framing import strip_unsafe
from agentcomms.limits import MAX_MESSAGE_CHARS

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text


@cache
def stdout() -> Console:
    # No markup: what we print holds text from agents, chats and users, and "[/]" in a message
    # must print as itself, not raise MarkupError. Styling is explicit (rich Text), see `styled`.
    # No emoji codes either: a command's "ls /tmp:cd:" must not print as "ls /tmp💿".
    from rich.console import Console

    return Console(markup=False, highlight=False, emoji=False)


@cache
def stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, markup=False, highlight=False, emoji=False)


def shown(text: str) -> str:
    """Text from outside, fit for the human's terminal: no escape sequences or control
    characters (an agent's message must not retitle the window or write the clipboard)."""
    return strip_unsafe(text)


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line of plain strings and (text, style) pairs, e.g. styled(("error:", "bold red"), " x")."""
    from rich.text import Text

    return Text.assemble(*parts)


def print_error(message: str) -> None:
    """One sentence on stderr: no traceback for a user's mistake."""
    stderr().print(styled(("error:", "bold red"), " ", shown(message)), soft_wrap=True)


def fail(message: str, *, code: int = 1) -> NoReturn:
    """Print one sentence to stderr and exit non-zero."""
    print_error(message)
    raise SystemExit(code)


def print_fields(rows: list[tuple[str, str | None]]) -> None:
    """Label/value lines, never truncated (paths must survive a narrow or piped terminal)."""
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        if value is not None:
            sys.stdout.write(f"  {label:<{width}}  {value}\n")
    sys.stdout.flush()


# How many names a one-line list shows before it says how many more there are: a status line
# naming a thousand agents (15,000 characters, measured) is read by nobody.
NAMES_SHOWN = 10


def named(names: Sequence[str], *, shown: int = NAMES_SHOWN) -> str:
    """``a, b, c``; of many, the first few and how many more (``a, b and 998 more``)."""
    if len(names) <= shown + 1:  # "and 1 more" is no shorter than the name
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown:,} more"


def print_json(data: Any) -> None:
    """One JSON document: what a command that ends prints, read whole by `json.load`."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def print_json_line(data: Any) -> None:
    """One compact JSON object on its own line: what a command that keeps printing (`--follow`)
    prints for each thing, so a script reads it line by line (`json.loads` each line) as it
    comes. Flushed, or a pipe would hold it back."""
    sys.stdout.write(json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


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


def run_async(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a coroutine function to completion, reporting a user's mistake as one line."""
    import asyncio

    try:
        return asyncio.run(fn(*args, **kwargs))
    except AgentcommsError as exc:
        fail(str(exc))


def gateway() -> Path:
    """The gateway's socket, as the config names it.

    Only `server.socket_path` is read from the config: a client needs nothing else, and must not
    need the secrets the gateway uses.
    """
    from agentcomms.config.reading import gateway_socket

    try:
        return gateway_socket()
    except AgentcommsError as exc:
        fail(str(exc))


def ask(method: str, **params: Any) -> Any:
    """One request to the gateway; its error reply as one line on stderr."""
    from agentcomms.client import call

    return run_async(call, gateway(), method, **params)
