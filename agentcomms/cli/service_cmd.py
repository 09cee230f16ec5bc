"""``agentcomms service install | uninstall | status | logs``: `up` as the user's own service."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from agentcomms.cli import app
from agentcomms.cli.common import console, print_fields, print_json, styled, user_errors

service_app = typer.Typer(
    name="service",
    no_args_is_help=True,
    help="""Run `agentcomms up` as your own service, so it outlives the terminal.

On Linux a systemd user unit (~/.config/systemd/user/agentcomms.service):
restarted when it fails, started when you log in; `loginctl enable-linger
$USER` keeps it running after you log out, and across reboots. On macOS a
launchd agent (~/Library/LaunchAgents/dev.agentcomms.up.plist).

The service runs this agentcomms, with the agentcomms home and the PATH of
the shell you install from. It does not see your shell's other variables:
put what the config's ${VAR} references need in ~/.agentcomms/service.env
(systemd). Installing again changes nothing, unless agentcomms moved;
uninstalling leaves the config and data. Its logs: `agentcomms service
logs`.""",
)
app.add_typer(service_app, name="service")

JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _say_outcome(verb: str, path: Path, changed: bool, notes: list[str]) -> None:
    console.print(
        styled((f"{verb}: ", "bold green"), str(path))
        if changed
        else f"unchanged: {path} is already this agentcomms' service"
    )
    for note in notes:
        console.print(styled(("note:", "yellow"), f" {note}"), soft_wrap=True)


@service_app.command("install")
def install() -> None:
    """Write the service's unit and start it (systemd --user, or launchd on macOS).

    Running it again changes nothing; after agentcomms moved (a new virtualenv) it rewrites
    the unit and restarts the service.
    """
    from agentcomms import user_service

    with user_errors():
        outcome = user_service.install()
    _say_outcome("installed", outcome.path, outcome.changed, outcome.notes)


@service_app.command("uninstall")
def uninstall() -> None:
    """Stop the service and remove its unit; the config, the data and the logs stay."""
    from agentcomms import user_service

    outcome = user_service.uninstall()
    if not outcome.changed:
        console.print(f"not installed: there is no {outcome.path}")
        return
    _say_outcome("removed", outcome.path, True, outcome.notes)


@service_app.command("status")
def service_status(as_json: JsonOption = False) -> None:
    """Say whether the service is installed and running, and what to do if it is not.
    Exits 1 when it is installed but not running."""
    from agentcomms import user_service

    found = user_service.status()
    if as_json:
        print_json(found.as_json())
    else:
        print_fields(
            [
                ("Service", found.detail),
                ("Unit", str(found.path)),
                ("Logs", str(_log_file())),
                ("To do", found.fix),
            ]
        )
    if found.installed and found.running is False:
        raise typer.Exit(1)


def _log_file() -> Path:
    from agentcomms.config import load_sections
    from agentcomms.user_service import default_log_file

    with user_errors():
        configured = load_sections(["logging"]).logging.file
    return configured or default_log_file()


@service_app.command("logs")
def logs(
    lines: Annotated[
        int, typer.Option("--lines", "-n", min=0, help="How many of the last lines to show.")
    ] = 50,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new lines (Ctrl-C stops).")
    ] = False,
) -> None:
    """Show the last lines of `up`'s log (`logging.file`, by default
    ~/.agentcomms/logs/agentcomms.log, rotated at 10 MB, five kept).

    systemd also keeps what `up` printed on its terminal: `journalctl --user -u agentcomms`.
    """
    path = _log_file()
    if not path.exists():
        console.print(
            f"no log yet at {path}: `agentcomms up` (or the service) writes it when it starts"
        )
        if not follow:
            return
    for line in last_lines(path, lines):
        print(line)
    if follow:
        try:
            _follow(path)
        except KeyboardInterrupt:
            pass


def last_lines(path: Path, count: int) -> list[str]:
    """The last `count` lines of `path` (read from its end: a log may be large)."""
    if count == 0 or not path.exists():
        return []
    with path.open("rb") as f:
        f.seek(0, 2)
        end = f.tell()
        block, data = 64 * 1024, b""
        while end > 0 and data.count(b"\n") <= count:
            start = max(0, end - block)
            f.seek(start)
            data = f.read(end - start) + data
            end = start
    return data.decode("utf-8", errors="replace").splitlines()[-count:]


def _follow(path: Path) -> None:
    """Print what is appended to `path`, across its rotation (a new file under the same name)."""
    handle, inode = None, None
    while True:
        if handle is None and path.exists():
            handle = path.open("r", encoding="utf-8", errors="replace")
            if inode is None:
                handle.seek(0, 2)  # the first file: its past was printed already
            inode = path.stat().st_ino
        line = handle.readline() if handle is not None else ""
        if line:
            print(line, end="", flush=True)
            continue
        time.sleep(0.5)
        try:
            rotated = path.stat().st_ino != inode
        except FileNotFoundError:
            rotated = True
        if rotated and handle is not None:
            handle.close()
            handle = None
