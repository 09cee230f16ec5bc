"""`agentcomms console`: the local web console's address, with its token; with no gateway running,
the gateway itself (which serves the console) in the foreground."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from agentcomms.cli import app
from agentcomms.cli.common import fail, print_fields, run_async

LogoutAllOption = Annotated[
    bool,
    typer.Option(
        "--logout-all",
        help="End every browser's console session; each opens the printed address again.",
    ),
]


@app.command("console")
def console_command(
    url_only: Annotated[
        bool,
        typer.Option(
            "--url",
            help="Print only the address (with its token), for scripts: "
            '`xdg-open "$(agentcomms console --url)"`; never starts a gateway.',
        ),
    ] = False,
    logout_all: LogoutAllOption = False,
) -> None:
    """Print the local web console's address with its token (open it in a browser).

    The gateway serves the console on loopback (`console.port`, 8235). With no gateway
    running, this runs one in the foreground (Ctrl-C stops it), as `agentcomms gateway` does;
    `agentcomms up` serves the console too. The address opens a session of that console in
    the browser; `--logout-all` ends every one (a browser you no longer trust, a shared
    machine), without a restart.
    """
    if logout_all:
        _logout_all()
        return
    from agentcomms.config.reading import gateway_socket
    from agentcomms.console_token import with_token

    status = run_async(_gateway_status, gateway_socket())
    if status is None and url_only:
        fail("no gateway is running to serve the console: start `agentcomms up` first")
    if status is None:
        from agentcomms.cli.run_cmd import _gateway, _load

        run_async(_gateway, _load())
        return
    if not status.get("console"):
        fail(
            "the running gateway serves no console: set console.enabled to true in the config "
            "(`agentcomms config show` shows it), then restart agentcomms"
        )
    if url_only:
        print(with_token(status["console"]))
    else:
        print_fields([("Console", with_token(status["console"]))])


async def _gateway_status(socket: Any) -> dict[str, Any] | None:
    from agentcomms.client import call
    from agentcomms.errors import GatewayUnavailable

    try:
        status: dict[str, Any] = await asyncio.wait_for(call(socket, "status"), timeout=5)
    except (GatewayUnavailable, TimeoutError):
        return None
    return status


def _logout_all() -> None:
    from agentcomms.console_sessions import revoke_all, sessions_path

    try:
        ended = revoke_all()
    except OSError as exc:
        fail(f"cannot end the console's sessions in {sessions_path()}: {exc}")
    print(
        f"ended {ended} console session{'s' if ended != 1 else ''}; open the address "
        "`agentcomms console` prints to use the console again"
    )
