"""Who may reach agents from chat: `pair CODE` admits a sender, `senders` lists, `senders revoke`.

A sender nobody admitted gets one short reply with a pairing code; their messages are recorded
as rejected and reach no agent until `agentcomms pair CODE`.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from agentcomms.cli import app
from agentcomms.cli.common import console, print_json, run_async, shown
from agentcomms.client import call
from agentcomms.config import load_config

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]

senders_app = typer.Typer(
    help="Chat senders allowed to reach agents (`agentcomms senders`), and revoking them.",
    invoke_without_command=True,
)
app.add_typer(senders_app, name="senders")


def _gateway(method: str, **params: Any) -> Any:
    return run_async(call, load_config().server.socket(), method, **params)


@app.command()
def pair(
    code: Annotated[str, typer.Argument(help="The code the sender was given, e.g. K7QF3M.")],
    as_json: JsonOption = False,
) -> None:
    """Admit the chat sender who was given CODE: their next messages reach agents."""
    result = _gateway("pair", code=code)
    if as_json:
        print_json(result)
        return
    who = shown(result.get("sender_name") or result["sender_id"])
    console.print(f"admitted {who} ({result['provider']}:{shown(result['sender_id'])})")
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


@senders_app.callback()
def senders(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List chat senders: allowed (config or paired), revoked, and pending a pairing code."""
    if ctx.invoked_subcommand is not None:
        return
    result = _gateway("senders")
    if as_json:
        print_json(result)
        return
    if not result["senders"]:
        console.print("no senders yet: allow some in chat.allowed_senders, or pair them")
        return
    table = Table("provider", "sender", "name", "state", "source", "code")
    for s in result["senders"]:
        table.add_row(
            s["provider"],
            shown(s["sender_id"]),
            shown(s.get("sender_name") or ""),
            s["state"],
            s["source"],
            s.get("code") or "",
        )
    console.print(table)


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
