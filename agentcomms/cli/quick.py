"""The quick commands without typer: their arguments parsed here, their work done by
:mod:`agentcomms.cli.talk` and :mod:`agentcomms.cli.status`, as the typer commands do it.

Typer and click cost more than the command itself (the gateway answers in milliseconds), and
an agent's hooks and scripts call these many times. Only the plain forms are parsed here: any
argument not recognised, a value out of range, `--help`, or a subcommand (`agents register`)
is left to the typer app, which gives the help and the usage errors. The options accepted here
are the typer commands' own (`agents_cmd.py`, `run_cmd.py`); `tests/test_cli_quick.py` checks
that both paths agree.
"""

from __future__ import annotations

import errno
import importlib
import math
from collections.abc import Callable
from typing import Any, NamedTuple


class Option(NamedTuple):
    dest: str
    kind: Callable[[str], Any] | None = None  # None: a flag
    low: float = -math.inf
    high: float = math.inf


class Command(NamedTuple):
    run: str  # "module:function", called with the parsed values as keyword arguments
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    options: dict[str, Option] = {}  # noqa: RUF012 - read only, like every Command
    defaults: dict[str, Any] = {}  # noqa: RUF012


def _json() -> dict[str, Option]:
    return {"--json": Option("as_json")}


def _wait() -> dict[str, Option]:
    return {"--wait": Option("wait"), "--timeout": Option("timeout", float, 0.1, 300)}


_LIMIT = Option("limit", int, 1, 1000)
_FOLLOW = Option("follow")

COMMANDS: dict[str, Command] = {
    "send": Command(
        "talk:send",
        ("agent",),
        ("message",),
        {**_wait(), "--event-id": Option("event_id", str), **_json()},
        {"timeout": 10.0, "event_id": None},
    ),
    "interrupt": Command(
        "talk:interrupt",
        ("agent",),
        (),
        {"--reason": Option("reason", str), "-r": Option("reason", str), **_wait(), **_json()},
        {"timeout": 10.0, "reason": None},
    ),
    "events": Command(
        "talk:events",
        ("agent",),
        (),
        {
            "-n": _LIMIT,
            "--limit": _LIMIT,
            "--since": Option("since", str),
            "--follow": _FOLLOW,
            "-f": _FOLLOW,
            **_json(),
        },
        {"limit": 20, "since": None},
    ),
    "reply": Command(
        "talk:reply",
        ("channel",),
        ("message",),
        {"--agent": Option("agent", str), "-a": Option("agent", str), **_json()},
        {"agent": None},
    ),
    "channels": Command("talk:channels", options=_json()),
    "agents": Command(
        "talk:agents", options={"--all": Option("show_all"), "-a": Option("show_all"), **_json()}
    ),
    "inbox": Command(
        "talk:inbox",
        options={"-n": _LIMIT, "--limit": _LIMIT, "--follow": _FOLLOW, "-f": _FOLLOW, **_json()},
        defaults={"limit": 20},
    ),
    "status": Command("status:show", options=_json()),
}


def run(args: list[str]) -> int | None:
    """Run a quick command; None when ``args`` is not one the quick path parses."""
    command = COMMANDS.get(args[0]) if args else None
    if command is None:
        return None
    values = parse(command, args[1:])
    if values is None:
        return None
    module, _, function = command.run.partition(":")
    try:
        getattr(importlib.import_module(f"agentcomms.cli.{module}"), function)(**values)
    except KeyboardInterrupt:  # Ctrl-C ends `events -f` or `inbox -f`: quietly, as typer does
        return 130
    except OSError as exc:  # `agentcomms events x | head` closed the pipe: quietly, as typer does
        if exc.errno != errno.EPIPE:
            raise
        return 1
    return 0


def parse(command: Command, args: list[str]) -> dict[str, Any] | None:
    """The arguments as the typer command would receive them, or None to leave them to typer."""
    values: dict[str, Any] = {o.dest: False for o in command.options.values() if o.kind is None}
    values |= dict.fromkeys(command.optional) | command.defaults
    positional: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            positional.extend(rest)
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name not in command.options and len(arg) > 2 and not arg.startswith("--"):
            name, eq, inline = arg[:2], "=", arg[2:]  # -n5
        option = command.options.get(name)
        if option is None:
            return None
        if option.kind is None:
            if eq:
                return None
            values[option.dest] = True
            continue
        raw = inline if eq else next(rest, None)
        if raw is None:
            return None
        value = _convert(option, raw)
        if value is None:
            return None
        values[option.dest] = value
    names = command.required + command.optional
    if not len(command.required) <= len(positional) <= len(names):
        return None
    values |= dict(zip(names, positional, strict=False))
    return values


def _convert(option: Option, raw: str) -> Any:
    assert option.kind is not None
    try:
        value = option.kind(raw)
    except ValueError:
        return None
    if option.kind in (int, float) and not option.low <= value <= option.high:
        return None
    return value
