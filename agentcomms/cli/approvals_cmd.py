"""Answering an agent's permission requests, questions and plans from the terminal: list them,
approve, deny, answer.

Each is a client of the gateway socket (`agentcomms up` must be running). The first answer wins,
from any surface, the agent's own dialog included; a later one is told who answered first.
"""

from __future__ import annotations

import getpass
from typing import Annotated, Any

import typer

from agentcomms.approval_models import Decision
from agentcomms.approval_outcome import how_decided
from agentcomms.cli import app
from agentcomms.cli.common import JsonOption, console, print_json
from agentcomms.cli.output import ask, shown, stdout

IdArgument = Annotated[str, typer.Argument(help="The approval's id, e.g. K7QF.")]


@app.command("approvals")
def approvals(as_json: JsonOption = False) -> None:
    """List what waits for your answer: permission requests (approve or deny), questions with
    their options (answer), plans (approve, or deny to send the agent back to planning)."""
    result = ask("approvals")
    if as_json:
        print_json(result)
        return
    if not result["approvals"]:
        stdout().print("no permission requests, questions or plans wait for an answer")
        return
    from rich.table import Column, Table

    # Folded, never cut with an ellipsis: the end of a long command is what it runs.
    columns = ("id", "agent", "asks", "what", "since", "answer with")
    table = Table(*(Column(name, overflow="fold") for name in columns))
    for a in result["approvals"]:
        table.add_row(
            a["id"],
            a["agent_id"],
            _asks(a),
            _what(a),
            a["opened_at"][11:19],
            _answer_with(a),
        )
    stdout().print(table)


def _asks(a: dict[str, Any]) -> str:
    ask = a.get("ask", "permission")
    return shown(a["tool"]) if ask == "permission" else str(ask)


def _what(a: dict[str, Any]) -> str:
    """The input, the question with its numbered options, or the plan."""
    if a.get("ask") == "question":
        options = "\n".join(f"{n}. {shown(o)}" for n, o in enumerate(a.get("options") or [], 1))
        return f"{shown(a.get('question') or '')}\n{options}".strip()
    if a.get("ask") == "plan":  # whole: the chats send people here for the rest of it
        return shown(a.get("question") or a["input"])
    return shown(a["input"])


def _answer_with(a: dict[str, Any]) -> str:
    ask, approval_id = a.get("ask", "permission"), a["id"]
    if not a.get("whole", True):
        return f"deny {approval_id}, or answer it in the agent's own dialog (too long to show here)"
    if ask == "question":
        return f'answer {approval_id} "LABEL, NUMBER or words"'
    if ask == "plan":
        return f"approve {approval_id} / deny {approval_id} -m WHY"
    session = " [--session]" if a["session_offered"] else ""
    return f"approve {approval_id}{session} / deny {approval_id}"


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
    """Allow an agent's permission request (the tool runs), or approve its plan (it stops
    planning and carries it out)."""
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
    """Deny an agent's permission request (the tool does not run), send its plan back (it
    keeps planning), or decline its question; the model hears why."""
    _answer(approval_id, "deny", message, as_json)


@app.command("answer")
def answer(
    approval_id: IdArgument,
    text: Annotated[
        str,
        typer.Argument(
            help='An option\'s label or number; several comma-separated ("1, 3") where the '
            "question takes more than one; or your own words, which the agent reads as typed."
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Answer an agent's question (`agentcomms approvals` lists it with its options).

    For example `agentcomms answer K7QF blue`, `agentcomms answer K7QF 2`, or
    `agentcomms answer K7QF "neither: use green"`. To refuse to answer, `deny` it."""
    _answer(approval_id, "answer", None, as_json, text=text)


def _answer(
    approval_id: str,
    behavior: str,
    message: str | None,
    as_json: bool,
    *,
    text: str | None = None,
) -> None:
    params: dict[str, Any] = {"id": approval_id, "behavior": behavior, "by": _who(), "via": "cli"}
    if message:
        params["message"] = message
    if text is not None:
        params["answer"] = text
    result = ask("approval_decide", **params)
    if as_json:
        print_json(result)
        return
    decision = Decision(
        approval_id=result["id"],
        behavior=result["behavior"],
        message=result.get("message"),
        answer=result.get("answer"),
        by=result["decided_by"],
        via=result["decided_via"],
    )
    said = f"{how_decided(decision)} ({decision.via})"
    if result["accepted"]:
        console.print(f"{result['id']}: {said}")
    else:
        console.print(f"{result['id']} was answered already: {said}")


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "the terminal's user"
