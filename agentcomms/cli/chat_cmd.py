"""Who may reach agents from chat: `pair CODE` admits a sender, `senders` lists, `senders revoke`.

A sender nobody admitted gets one short reply with a pairing code; their messages are recorded
as rejected and reach no agent until the human runs `agentcomms pair CODE`, sees who the code
belongs to and says yes on the terminal (`--yes` for scripts).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from agentcomms.cli import app
from agentcomms.cli.common import (
    JsonOption,
    console,
    err_console,
    fail,
    print_json,
    run_async,
    shown,
)
from agentcomms.client import call
from agentcomms.config import load_config

senders_app = typer.Typer(
    help="Chat senders allowed to reach agents (`agentcomms senders`), and revoking them.",
    invoke_without_command=True,
)
app.add_typer(senders_app, name="senders")


def _gateway(method: str, **params: Any) -> Any:
    return run_async(call, load_config().server.socket(), method, **params)


YesOption = Annotated[
    bool,
    typer.Option(
        "--yes",
        help="Admit without asking (for scripts). Without it, pair asks on the terminal.",
    ),
]


@app.command()
def pair(
    code: Annotated[str, typer.Argument(help="The code the sender was given, e.g. K7QF3M.")],
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Admit the chat sender who was given CODE, once you have seen who they are: they are
    told on their chat, what they wrote while waiting reaches the agent then, and so do their
    next messages."""
    who = _gateway("pair", code=code)
    err_console.print(_describe(who), soft_wrap=True)
    if not yes:
        if not sys.stdin.isatty():
            fail(
                "not admitted: admitting a chat sender needs your yes on a terminal, and this "
                "is not one; run it in a terminal, or add --yes to admit them from a script"
            )
        if not typer.confirm("Admit them?", default=False, err=True):
            fail("not admitted")
    result = _gateway("pair", code=code, confirm=True)
    if as_json:
        print_json(result)
        return
    name = shown(result.get("sender_name") or result["sender_id"])
    console.print(f"admitted {name} ({result['provider']}:{shown(result['sender_id'])})")
    if result["agent_id"] is None:
        channel = shown(result["channel_id"])
        console.print(
            f"note: {channel} is not mapped to an agent; add "
            f'"{channel}": "AGENT" to chat.channels (or they start messages with @AGENT '
            "from a mapped chat)",
            soft_wrap=True,
        )
    else:
        console.print(f"their messages in {shown(result['channel_id'])} go to {result['agent_id']}")
    if result.get("held"):
        console.print(
            f"{result['passed_on']} of the {result['held']} messages they wrote while waiting "
            "passed on",
            soft_wrap=True,
        )
    if result.get("told") is False:
        console.print("note: they could not be told on their chat (see the gateway's log)")


def _describe(who: dict[str, Any]) -> str:
    """Who a pairing code would admit, for the human to judge before saying yes."""
    name = shown(who.get("sender_name") or "(no name)")
    goes = (
        f"their messages would go to {who['agent_id']}"
        if who["agent_id"]
        else "the chat is mapped to no agent"
    )
    wrote = who.get("wrote_at")
    when = (
        datetime.fromisoformat(wrote).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        if wrote
        else "an unknown time"
    )
    return (
        f"{name}, {who['provider']} sender {shown(who['sender_id'])}, wrote in "
        f"{shown(who['channel_id'])} at {when}; {goes}"
    )


@senders_app.callback()
def senders(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List chat senders: allowed (config or paired), revoked, and waiting to pair (their codes
    are not shown: the sender tells you theirs)."""
    if ctx.invoked_subcommand is not None:
        return
    result = _gateway("senders")
    if as_json:
        print_json(result)
        return
    if not result["senders"]:
        console.print("no senders yet: allow some in chat.allowed_senders, or pair them")
        return
    from rich.table import Table

    table = Table("provider", "sender", "name", "state", "source", "since")
    for s in result["senders"]:
        table.add_row(
            s["provider"],
            shown(s["sender_id"]),
            shown(s.get("sender_name") or ""),
            s["state"],
            s["source"],
            s.get("created_at") or s.get("admitted_at") or "",
        )
    console.print(table)
    if result.get("pending"):
        # The codes are not shown: a sender proves they talked to you by telling you theirs.
        console.print(
            f"{result['pending']} waiting to pair: admit one with `agentcomms pair CODE`, "
            "using the code they tell you"
        )


@senders_app.command("revoke")
def revoke(
    sender: Annotated[str, typer.Argument(help="PROVIDER:SENDER_ID, e.g. telegram:456.")],
    as_json: JsonOption = False,
) -> None:
    """Revoke a paired sender: their messages are rejected again (and they may ask anew)."""
    provider, sep, sender_id = sender.partition(":")
    if not sep or not sender_id:
        raise typer.BadParameter("expected PROVIDER:SENDER_ID, e.g. telegram:456")
    result = _gateway("revoke_sender", provider=provider, sender_id=sender_id)
    if as_json:
        print_json(result)
    else:
        console.print(f"revoked {shown(sender)}")
