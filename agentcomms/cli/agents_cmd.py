"""Talking to agents from the terminal: list, register, send, interrupt, read events, reply, inbox.

Every command is a client of the gateway socket (`agentcomms up` must be running); `--json` prints
the gateway's answer for scripts.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum
from typing import Annotated, Any

import typer

from agentcomms.cli import app
from agentcomms.cli.common import (
    console,
    fail,
    message_or_stdin,
    print_json,
    run_async,
    shown,
    styled,
)
from agentcomms.client import GatewayClient, call
from agentcomms.config import host_name, load_config
from agentcomms.models import MAX_MESSAGE_CHARS, PaneTarget

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
WaitOption = Annotated[
    bool,
    typer.Option(
        "--wait",
        help="Return only once the text is in the pane, and submitted where the agent's hooks "
        "report (or the timeout).",
    ),
]
TimeoutOption = Annotated[
    float, typer.Option("--timeout", min=0.1, max=300, help="Seconds --wait waits at most.")
]


class DeliverChoice(StrEnum):
    when_ready = "when-ready"
    now = "now"


agents_app = typer.Typer(
    help="List agents (`agentcomms agents [--all]`), register or unregister their panes.",
    invoke_without_command=True,
)
app.add_typer(agents_app, name="agents")


def _print_result(result: Any, as_json: bool, summary: str) -> None:
    """The gateway's answer for scripts, or one line for people."""
    if as_json:
        print_json(result)
    else:
        console.print(summary)


def _gateway(method: str, **params: Any) -> Any:
    socket = load_config().server.socket()
    return run_async(call, socket, method, **params)


@agents_app.callback()
def agents(
    ctx: typer.Context,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Include offline agents (unregistered panes).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """List agents: id, pane, status and how many messages wait for each."""
    if ctx.invoked_subcommand is not None:
        return
    result = _gateway("agents", include_offline=show_all)
    if as_json:
        print_json(result)
        return
    from rich.table import Table

    table = Table("agent", "type", "target", "status", "state", "pending", "last error")
    for a in result["agents"]:
        table.add_row(
            a["id"],
            a["type"],
            shown(a["target"] or "-"),
            a["status"]
            + (f" since {a['unreachable_since']}" if a.get("unreachable_since") else ""),
            shown(_state(a)),
            "?" if a["pending"] is None else str(a["pending"]),
            shown(a.get("last_error") or ""),
        )
    if not result["agents"]:
        hint = "" if show_all else " (try --all)"
        console.print(f"no agents{hint}; register one with `agentcomms agents register`")
        return
    console.print(table)


def _state(agent: dict[str, Any]) -> str:
    """`busy since 19:07:18`, `waiting (permission for Bash: ls)`, `unknown (no hooks)`."""
    state = str(agent.get("state") or "unknown")
    if state == "unknown":
        return "unknown (no hooks)"
    if agent.get("waiting_for"):
        state += f" ({agent['waiting_for']})"
    if since := agent.get("state_since"):
        state += f" since {str(since)[11:19]}"
    return state


@agents_app.command("register")
def register(
    agent_id: Annotated[str, typer.Argument(help="The agent's id, e.g. backend.")],
    tmux: Annotated[str, typer.Option("--tmux", "-t", help="tmux target session:window.pane.")],
    socket: Annotated[
        str | None,
        typer.Option(
            "--socket",
            "-S",
            help="tmux socket path. Unset: the server `tmux` reaches from this shell "
            "(the one you are in, inside tmux), recorded so the worker types into that one.",
        ),
    ] = None,
    interrupt_key: Annotated[
        str, typer.Option("--interrupt-key", help="Key `interrupt` presses: C-c, Escape…")
    ] = "C-c",
    submit_delay_ms: Annotated[
        int, typer.Option("--submit-delay-ms", min=0, max=10_000, help="Pause before Enter.")
    ] = 150,
    host: Annotated[
        str | None, typer.Option("--host", help="Host whose worker types into the pane.")
    ] = None,
    max_chars: Annotated[
        int | None,
        typer.Option(
            "--max-chars",
            min=100,
            max=MAX_MESSAGE_CHARS,
            help="Longest text typed into the pane; longer text is cut with a visible marker "
            "and the event says so. Default: whole messages (up to 100,000 characters).",
        ),
    ] = None,
    deliver: Annotated[
        DeliverChoice,
        typer.Option(
            "--deliver",
            help="when-ready: type once the agent is at its prompt (its hooks and its pane say "
            "so); now: whenever its pane shows no dialog.",
        ),
    ] = DeliverChoice.when_ready,
    as_json: JsonOption = False,
) -> None:
    """Register an agent's tmux pane; messages waiting for it are typed in order.

    Example: agentcomms agents register backend --tmux dev:0.1 --interrupt-key Escape
    """
    # The gateway's socket is local, so without --host the pane is on this machine: look at it.
    missing = None
    if host is None or host == host_name():
        socket, missing = run_async(_look_at_pane, tmux, socket)
    params: dict[str, Any] = {
        "agent_id": agent_id,
        "target": tmux,
        "interrupt_key": interrupt_key,
        "submit_delay_ms": submit_delay_ms,
    }
    if deliver is not DeliverChoice.when_ready:
        params["deliver"] = deliver.value
    if socket:
        params["socket"] = socket
    if host:
        params["host"] = host
    if max_chars:
        params["max_chars"] = max_chars
    result = _gateway("register", **params)
    summary = f"registered {agent_id} → {tmux} on {result['host']}"
    if socket:
        summary += f" (tmux server {socket})"
    if missing:
        summary += f"\n  note: {missing}; messages wait until the pane exists"
    _print_result(result, as_json, summary)


async def _look_at_pane(target: str, socket: str | None) -> tuple[str | None, str | None]:
    """The socket to record, and why the pane cannot be typed into from here (None: it can).

    Without --socket, pin the server this shell means: the worker's environment may reach
    another one (a worker started outside tmux does not see this shell's $TMUX, `tmux -L work`).
    """
    from agentcomms.bridge import BridgeError, TmuxAdapter

    adapter = TmuxAdapter()
    if socket is None:
        socket = await adapter.default_server_socket()
    try:
        await adapter.pane_info(PaneTarget(target=target, socket=socket))
    except BridgeError as exc:  # no such pane, no tmux server, tmux not installed
        return socket, str(exc)
    return socket, None


@agents_app.command("unregister")
def unregister(
    agent_id: Annotated[str, typer.Argument(help="The agent's id.")],
    as_json: JsonOption = False,
) -> None:
    """Unregister an agent's pane; new messages wait for it until it registers again."""
    result = _gateway("unregister", agent_id=agent_id)
    _print_result(result, as_json, f"unregistered {agent_id}; its messages will wait")


def _print_post(result: dict[str, Any], as_json: bool, what: str, agent: str) -> None:
    if as_json:
        print_json(result)
        return
    state = result.get("status", "queued")
    console.print(f"{what} {result['event_id']}: {state}")
    if note := result.get("note"):
        console.print(f"  note: {note}", soft_wrap=True)
    if state == "failed":
        fail(f"{what} failed: {result.get('error')}")
    if state == "rejected":  # e.g. a worker whose deployment key is not the gateway's
        fail(f"{what} was rejected and not typed (the note says why)")
    if state == "queued" and (why := _why_it_waits(agent)):
        console.print(f"  note: {why}", soft_wrap=True)


def _why_it_waits(agent_id: str) -> str | None:
    """Why a queued message will not be typed soon, so a typo in the agent id shows at once."""
    agents = _gateway("agents", include_offline=True)["agents"]
    agent = next((a for a in agents if a["id"] == agent_id), None)
    if agent is None or agent["status"] == "offline":
        return (
            f"no pane is registered for {agent_id!r}; the message waits until "
            f"`agentcomms agents register {agent_id} --tmux SESSION:WINDOW.PANE`"
        )
    if agent["status"] == "broken":
        return f"the mailbox of {agent_id!r} is broken: {agent['last_error']}"
    if agent["status"] == "unreachable":
        return f"the pane of {agent_id!r} is unreachable ({agent['last_error']}); the message waits"
    return None


@app.command()
def send(
    agent: Annotated[str, typer.Argument(help="The agent's id.")],
    message: Annotated[
        str | None,
        typer.Argument(help="Text typed into the agent's pane; left out, it is read from stdin."),
    ] = None,
    wait: WaitOption = False,
    timeout: TimeoutOption = 10,
    event_id: Annotated[
        str | None,
        typer.Option(
            "--event-id",
            help="Retry-safe id, evt_ and a ULID (agentcomms.ids.new_event_id() makes one): "
            "sending again with the same id types nothing twice.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Send a message to an agent; it is typed into the agent's pane, once, in order.

    Without --wait this returns once the message is durable (it survives crashes). A script that
    retries after an error passes the same --event-id each time. Long or multi-line text can be
    piped in: `git diff | agentcomms send reviewer`.
    """
    params: dict[str, Any] = {
        "agent_id": agent,
        "message": message_or_stdin(message, "echo text | agentcomms send AGENT"),
        "wait": wait,
        "timeout": timeout,
    }
    if event_id:
        params["event_id"] = event_id
    result = _gateway("send", **params)
    _print_post(result, as_json, "message", agent)


@app.command()
def interrupt(
    agent: Annotated[str, typer.Argument(help="The agent's id.")],
    reason: Annotated[str | None, typer.Option("--reason", "-r", help="Why (recorded).")] = None,
    wait: WaitOption = False,
    timeout: TimeoutOption = 10,
    as_json: JsonOption = False,
) -> None:
    """Press the agent's interrupt key (C-c unless registered otherwise), ahead of queued text."""
    params: dict[str, Any] = {"agent_id": agent, "wait": wait, "timeout": timeout}
    if reason:
        params["reason"] = reason
    _print_post(_gateway("interrupt", **params), as_json, "interrupt", agent)


@app.command()
def events(
    agent: Annotated[str, typer.Argument(help="The agent's id.")],
    limit: Annotated[int, typer.Option("-n", "--limit", min=1, max=1000, help="How many.")] = 20,
    since: Annotated[
        str | None, typer.Option("--since", help="Only events after this event id.")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Show an agent's latest events, oldest first; with --since, the events after that id."""
    socket = load_config().server.socket()
    run_async(_events, socket, agent, limit, since, follow, as_json)


async def _events(
    socket: Any, agent: str, limit: int, since: str | None, follow: bool, as_json: bool
) -> None:
    async with GatewayClient(socket) as gw:
        # Without --since, start from the latest `limit` events, as a person expects.
        tail = since is None
        while True:
            params: dict[str, Any] = {"agent_id": agent, "limit": limit, "tail": tail}
            if since:
                params["since"] = since
            tail = False
            batch = (await gw.call("events", **params))["events"]
            for e in batch:
                _print_event(e, as_json)
            if batch:
                since = batch[-1]["id"]
            if not follow:
                return
            if len(batch) < limit:
                await asyncio.sleep(0.5)


def _print_event(e: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(e)
        return
    text = e["payload"].get("text") or e["payload"].get("reason") or ""
    when = e["created_at"][11:19]
    console.print(
        styled(
            f"{when} {e['id']} ",
            (e["type"], "bold"),
            f" {shown(e['channel_id'])} {e['status']}: {shown(text)}",
            *([(f" ({e['note']})", "yellow")] if e.get("note") else []),
        )
    )


@app.command()
def reply(
    channel: Annotated[str, typer.Argument(help="Channel id, e.g. cli:local.")],
    message: Annotated[
        str | None,
        typer.Argument(help="The agent's message to the human; left out, it is read from stdin."),
    ] = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Replying agent.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Send an agent's message to a human channel (cli:local shows up in `agentcomms inbox`)."""
    text = message_or_stdin(message, "echo text | agentcomms reply cli:local -a AGENT")
    params: dict[str, Any] = {"channel_id": channel, "message": text}
    if agent:
        params["agent_id"] = agent
    result = _gateway("reply", **params)
    _print_result(result, as_json, f"sent {result['event_id']}")


@app.command()
def channels(as_json: JsonOption = False) -> None:
    """List channels and the agent each one talks to."""
    result = _gateway("channels")
    if as_json:
        print_json(result)
        return
    from rich.table import Table

    table = Table("channel", "provider", "agent", "status")
    for c in result["channels"]:
        status = c.get("status", "")
        if c.get("error"):
            status += f" ({shown(c['error'])})"
        table.add_row(c["channel_id"], c["provider"], c["agent_id"] or "-", status)
    console.print(table)


@app.command()
def inbox(
    limit: Annotated[int, typer.Option("-n", "--limit", min=1, max=1000, help="How many.")] = 20,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new messages as they come.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Messages your agents sent you on the local channel (cli:local), oldest first.

    With --follow, leave it open in a terminal: each new question from an agent appears as it
    is sent; answer with `agentcomms send AGENT …`.
    """
    socket = load_config().server.socket()
    run_async(_inbox, socket, limit, follow, as_json)


async def _inbox(socket: Any, limit: int, follow: bool, as_json: bool) -> None:
    async with GatewayClient(socket) as gw:
        if not follow:
            messages = (await gw.call("inbox", limit=limit))["messages"]
            if as_json:
                print_json({"messages": messages})
                return
            if not messages:
                console.print("inbox is empty")
            for m in messages:
                _print_inbox_message(m, as_json=False)
            return
        # Following: the newest `limit` first, then whatever comes after the last one shown.
        params: dict[str, Any] = {"limit": limit}
        while True:
            batch = (await gw.call("inbox", **params))["messages"]
            for m in batch:
                _print_inbox_message(m, as_json)
            if batch:
                params = {"limit": 1000, "since": batch[-1]["id"]}
            elif "since" not in params:
                params = {"limit": 1000}  # empty so far: everything that arrives is new
            await asyncio.sleep(0.5)


def _print_inbox_message(m: dict[str, Any], as_json: bool) -> None:
    if as_json:  # each message its own JSON object, as `events --json` prints events
        print_json(m)
        return
    who = m.get("source_agent_id") or m["agent_id"]
    console.print(
        styled(
            f"{m['created_at'][:19]} ",
            (shown(who), "bold"),
            f": {shown(m['payload'].get('text', ''))}",
        )
    )
