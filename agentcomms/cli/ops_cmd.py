"""Finding out what is wrong: `trace EVENT_ID` (one message's life) and `doctor` (the deployment)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentcomms.cli import app
from agentcomms.cli.common import JsonOption, console, print_json, run_async, shown, styled


@app.command()
def trace(
    event_id: Annotated[
        str,
        typer.Argument(
            help="The event's id, e.g. evt_01J… (from `send`), or an approval's (K7QF)."
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Tell one message's life, oldest first: accepted, queued, each try, typed (or why it waits).

    Ends with the workflow that holds it and its Temporal UI page. Works for messages to agents
    and for agents' messages to chats. For a permission request (its id, K7QF): opened, each
    rung of its escalation ladder (when it fired, where, or why not) and every answer.
    """
    from agentcomms.cli.common import ask_gateway

    result = ask_gateway("trace", event_id=event_id)
    if as_json:
        print_json(result)
        return
    _print_trace(result)


def _when(at: str | None) -> str:
    return at[:19].replace("T", " ") if at else " " * 19


def _print_trace(t: dict[str, Any]) -> None:
    to = f"for {t['agent_id']}" if t["direction"] == "in" else f"from {t['agent_id']}"
    console.print(
        styled((t["event_id"], "bold"), f" ({t['type']} {to}): ", (t["status"], "bold")),
        soft_wrap=True,
    )
    width = max(len(s["step"]) for s in t["steps"])
    for s in t["steps"]:
        console.print(
            f"  {_when(s['at'])}  {s['step']:<{width}}  {shown(s['detail'])}", soft_wrap=True
        )
    if t["status"] == "new" and t["why"]:
        console.print(styled(("  waits because:", "yellow")))
        for reason in t["why"]:
            console.print(f"    - {shown(reason)}", soft_wrap=True)
    if t["workflow_id"]:
        console.print(f"  workflow     {t['workflow_id']}", soft_wrap=True)
        console.print(
            f"  Temporal UI  {t['temporal_ui'] or 'temporal workflow show -w ' + t['workflow_id']}",
            soft_wrap=True,
        )


@app.command()
def doctor(as_json: JsonOption = False) -> None:
    """Check the whole deployment, one line each: config, Temporal, workers, panes, mailboxes,
    chat providers, the projection, the gateway, and the hooks in each agent where `agentcomms
    install` put them. Exits 0 only when all is well."""
    from agentcomms.cli.doctor import run_checks

    checks = run_async(run_checks)
    ok = all(c.ok for c in checks)
    if as_json:
        print_json({"ok": ok, "checks": [c.as_json() for c in checks]})
    else:
        for c in checks:
            mark = (
                ("!", "yellow")
                if c.ok and c.warn
                else ("✓", "green")
                if c.ok
                else ("✗", "bold red")
            )
            console.print(styled(mark, f" {shown(c.detail)}"), soft_wrap=True)
            if (c.warn or not c.ok) and c.fix:
                console.print(f"    → {shown(c.fix)}", soft_wrap=True)
    if not ok:
        raise typer.Exit(1)
