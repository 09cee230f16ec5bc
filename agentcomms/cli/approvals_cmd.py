"""Answering an agent's permission requests from the terminal: list them, approve, deny.

Each is a client of the gateway socket (`agentcomms up` must be running). The first answer wins,
from any surface, the agent's own dialog included; a later one is told who answered first.
"""

from __future__ import annotations

import getpass
from typing import Annotated, Any

import typer

from agentcomms.cli import app
from agentcomms.cli.common import console, print_json
from agentcomms.cli.output import ask, shown, stdout

IdArgument = Annotated[str, typer.Argument(help="The approval's id, e.g. K7QF.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


@app.command("approvals")
def approvals(as_json: JsonOption = False) -> None:
    """List the permission requests waiting for an answer."""
    result = ask("approvals")
    if as_json:
        print_json(result)
        return
    if not result["approvals"]:
        stdout().print("no permission requests wait for an answer")
        return
    from rich.table import Table

    table = Table("id", "agent", "tool", "input", "since", "for the session")
    for a in result["approvals"]:
        table.add_row(
            a["id"],
            a["agent_id"],
            shown(a["tool"]),
            shown(a["input"]),
            a["opened_at"][11:19],
            "offered (--session)" if a["session_offered"] else "-",
        )
    stdout().print(table)


@app.command("approve")
def approve(
    approval_id: IdArgument,
    session: Annotated[
        bool,
        typer.Option(
            "--session", help="Allow it for the rest of the agent's session, as the agent offered."
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Allow an agent's permission request: the tool runs."""
    _answer(approval_id, "allow_session" if session else "allow", None, as_json)


@app.command("deny")
def deny(
    approval_id: IdArgument,
    message: Annotated[
        str | None,
        typer.Option("--message", "-m", help="Why; the agent's model reads it word for word."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Deny an agent's permission request: the tool does not run, and the model hears why."""
    _answer(approval_id, "deny", message, as_json)


def _answer(approval_id: str, behavior: str, message: str | None, as_json: bool) -> None:
    params: dict[str, Any] = {"id": approval_id, "behavior": behavior, "by": _who(), "via": "cli"}
    if message:
        params["message"] = message
    result = ask("approval_decide", **params)
    if as_json:
        print_json(result)
        return
    if result["accepted"]:
        console.print(f"{result['id']}: {_said(result)}")
    else:
        console.print(f"{result['id']} was answered already: {_said(result)}")


def _said(result: dict[str, Any]) -> str:
    how = {
        "allow": "allowed",
        "allow_session": "allowed for the session",
        "deny": "denied",
        "terminal": "answered in the terminal",
        "timeout": "no answer in time",
    }.get(result["behavior"], str(result["behavior"]))
    by = "" if result["behavior"] in ("terminal", "timeout") else f" by {result['decided_by']}"
    return f"{how}{by} ({result['decided_via']})"


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "the terminal's user"
