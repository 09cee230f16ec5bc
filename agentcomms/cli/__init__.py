"""The ``agentcomms`` command.

:func:`main` is the console script, and imports almost nothing itself: scripts and agents' hooks
run the quick commands (`send`, `status`, `agents`, `interrupt`, `events`, `reply`, `channels`,
`inbox`, `hook`) many times, and each must answer at once. Those are answered by
:mod:`.quick` (standard library, the socket client, rich for a person's output) or, for `hook`,
by :func:`agentcomms.agents.hook.main`; everything else, every `--help` and every argument the
quick path does not recognise goes to the typer app (:mod:`.typer_app`, whose commands live in
``*_cmd.py`` modules), which also gives the usage errors.
"""

from __future__ import annotations

import os
import sys

# Not `from typing import …`: the hooks run through here around every tool call, and typing
# costs each process 5 to 6 ms of CPU at start (mypy reads this name as True).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from agentcomms.cli.typer_app import app as app

HOOK_MODULE = "agentcomms.agents.hook"


def __getattr__(name: str) -> Any:
    # `from agentcomms.cli import app` (the command modules, the tests) builds the typer app on
    # first use, so the console script does not pay for it when the quick path answers.
    if name == "app":
        from agentcomms.cli.typer_app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    _exit_skipping_finalization(_run(sys.argv[1:]))


def _run(args: list[str]) -> int:
    try:
        code = _quick(args)
        if code is None:
            from agentcomms.cli.typer_app import app

            app()
            code = 0
    except SystemExit as exc:  # click ends every command, successful or not, with SystemExit
        code = _exit_status(exc.code)
    return code


def _quick(args: list[str]) -> int | None:
    """The exit status of a quick command, or None when the typer app must answer."""
    if args[:1] == ["hook"] and "--help" not in args:
        hook = _hook_main()
        return None if hook is None else hook(args[1:])
    from agentcomms.cli import quick

    return quick.run(args)


def _hook_main() -> Callable[[list[str]], int] | None:
    """The agents' hook entry point, or None where this install has none (typer then says so)."""
    import importlib

    try:
        module = importlib.import_module(HOOK_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name in (HOOK_MODULE, HOOK_MODULE.rpartition(".")[0]):
            return None
        raise
    hook: Callable[[list[str]], int] = module.main
    return hook


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
    if "logging" in sys.modules:  # a quick command never loads it
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)
