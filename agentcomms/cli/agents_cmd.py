"""Talking to agents from the terminal: list, register, start and stop process agents, send,
interrupt, read events, reply, inbox.

Every command is a client of the gateway socket (`agentcomms up` must be running); `--json` prints
the gateway's answer for scripts. What the quick ones do is :mod:`agentcomms.cli.talk`, which
`agentcomms send …` reaches without typer (:mod:`agentcomms.cli.quick`); here are their
arguments and help.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from agentcomms.cli import app, talk
from agentcomms.cli.common import JsonOption, console, fail, print_json, run_async
from agentcomms.cli.output import ask
from agentcomms.config import host_name
from agentcomms.limits import MAX_MESSAGE_CHARS

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
    help="List agents (`agentcomms agents [--all]`), register or unregister their panes, start "
    "or stop process agents (ACP).",
    invoke_without_command=True,
)
app.add_typer(agents_app, name="agents")


def _print_result(result: Any, as_json: bool, summary: str) -> None:
    """The gateway's answer for scripts, or one line for people."""
    if as_json:
        print_json(result)
    else:
        console.print(summary)


@agents_app.callback()
def agents(
    ctx: typer.Context,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Include offline agents (unregistered panes).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """List agents: id, pane, status and how many messages wait for each."""
    if ctx.invoked_subcommand is None:
        talk.agents(show_all, as_json)


@agents_app.command("register")
def register(
    agent_id: Annotated[str, typer.Argument(help="The agent's id, e.g. backend.")],
    tmux: Annotated[str, typer.Option("--tmux", "-t", help="tmux target session:window.pane.")],
    socket: Annotated[
        str | None,
        typer.Option(
            "--socket",
            "-S",
            help="The pane's tmux server: a name as `tmux -L NAME` takes it, or a socket path "
            "as `tmux -S PATH`. Unset: the server `tmux` reaches from this shell (the one you "
            "are in, inside tmux), recorded so the worker types into that one.",
        ),
    ] = None,
    allow_missing: Annotated[
        bool,
        typer.Option(
            "--allow-missing",
            help="Register a pane that does not exist yet; its messages wait until it does.",
        ),
    ] = False,
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
    given = socket
    if socket is not None:
        socket = _socket_path(socket)
    # The gateway's socket is local, so without --host the pane is on this machine: look at it.
    missing = None
    if host is None or host == host_name():
        socket, missing = run_async(_look_at_pane, tmux, socket)
    if missing and not allow_missing:
        fail(_not_registered(tmux, given, socket, missing))
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
    result = ask("register", **params)
    summary = f"registered {agent_id} → {tmux} on {result['host']}"
    if socket:
        summary += f" (tmux server {socket})"
    if missing:
        summary += f"\n  note: {missing}; messages wait until the pane exists"
    _print_result(result, as_json, summary)


def _socket_path(given: str) -> str:
    from agentcomms.bridge.checks import socket_path
    from agentcomms.errors import InvalidTarget

    try:
        return socket_path(given)
    except InvalidTarget as exc:
        fail(f"--socket: {exc}")


def _not_registered(target: str, given: str | None, socket: str | None, why: str) -> str:
    """Why a pane that is not there was not registered, and what to do."""
    from agentcomms.bridge.checks import server_named

    return (
        f"nothing registered: {server_named(given, socket)} has no pane {target} ({why}). Start "
        "the agent's pane first, or name its server with --socket NAME (as `tmux -L NAME`) or "
        "--socket PATH; --allow-missing registers it anyway, its messages waiting until it exists"
    )


async def _look_at_pane(target: str, socket: str | None) -> tuple[str | None, str | None]:
    """The socket to record, and why the pane cannot be typed into from here (None: it can).

    Without --socket, pin the server this shell means: the worker's environment may reach
    another one (a worker started outside tmux does not see this shell's $TMUX, `tmux -L work`).
    """
    from agentcomms.bridge import BridgeError, TmuxAdapter
    from agentcomms.models import PaneTarget

    adapter = TmuxAdapter()
    named = socket is not None
    if socket is None:
        socket = await adapter.default_server_socket()
    try:
        await adapter.pane_info(PaneTarget(target=target, socket=socket))
    except BridgeError as exc:  # no such pane, no tmux server, tmux not installed
        # Outside tmux, a pane on a server of its own (`tmux -L work`) is not found here.
        elsewhere = "" if named else " (a pane of another tmux server: name it with --socket)"
        return socket, f"{exc}{elsewhere}"
    return socket, None


@agents_app.command("unregister")
def unregister(
    agent_id: Annotated[str, typer.Argument(help="The agent's id.")],
    as_json: JsonOption = False,
) -> None:
    """Unregister an agent's pane; new messages wait for it until it registers again."""
    result = ask("unregister", agent_id=agent_id)
    _print_result(result, as_json, f"unregistered {agent_id}; its messages will wait")


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
            help="Retry-safe id: evt_ and a ULID (26 characters: digits and capitals but I, L, "
            "O, U; the first 0-7), no other string; sending again with the same id types "
            "nothing twice. How to make one in a shell: see above.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Send a message to an agent; it is typed into the agent's pane, once, in order.

    Without --wait this returns once the message is durable (it survives crashes). A script that
    retries after an error passes the same --event-id each time, made before the first try:
    `id=evt_$(ulid build)` (python-ulid's command, installed beside agentcomms), or with the
    shell alone `id=evt_0$(LC_ALL=C tr -dc 0-9A-HJKMNP-TV-Z </dev/urandom | head -c 25)`.
    Long or multi-line text can be piped in: `git diff | agentcomms send reviewer`.
    """
    talk.send(agent, message, wait=wait, timeout=timeout, event_id=event_id, as_json=as_json)


@app.command()
def interrupt(
    agent: Annotated[str, typer.Argument(help="The agent's id.")],
    reason: Annotated[str | None, typer.Option("--reason", "-r", help="Why (recorded).")] = None,
    wait: WaitOption = False,
    timeout: TimeoutOption = 10,
    as_json: JsonOption = False,
) -> None:
    """Press the agent's interrupt key (C-c unless registered otherwise), ahead of queued text.

    An interrupt is for now: one its pane cannot take within a minute (the pane missing, the
    agent not registered) is never pressed, and its event fails saying so.
    """
    talk.interrupt(agent, reason, wait=wait, timeout=timeout, as_json=as_json)


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
    """Show an agent's latest events, oldest first; with --since, the events after that id.

    --json prints one document ({"events": [...]}); with --follow, one event per line.
    """
    talk.events(agent, limit, since, follow, as_json)


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
    talk.reply(channel, message, agent, as_json)


@app.command()
def channels(as_json: JsonOption = False) -> None:
    """List channels and the agent each one talks to."""
    talk.channels(as_json)


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
    is sent; answer with `agentcomms send AGENT …`. --json prints one document
    ({"messages": [...]}); with --follow, one message (or {"approval": ...}) per line.
    """
    talk.inbox(limit, follow, as_json)


# ---- process agents: started headless, driven over ACP --------------------------------------


@agents_app.command(
    "start", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
def start(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(help="The agent's id, e.g. backend.")],
    folder: Annotated[
        Path, typer.Option("--dir", "-d", help="The folder the agent works in.", show_default=False)
    ],
    acp: Annotated[
        bool,
        typer.Option("--acp", help="Run the ACP agent whose command follows `--`."),
    ] = False,
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            help="A known agent instead of a command: gemini (Gemini CLI's own --acp), "
            "claude-code or codex (through Zed's ACP adapters), installed with npm, pinned, "
            "when missing; or a kind the config names in acp.kinds.",
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="Host whose worker runs the agent. With --kind on another host, the kind's "
            "program is found there (on PATH or in ~/.cache/agentcomms-agents): install it there.",
        ),
    ] = None,
    new_session_if_lost: Annotated[
        bool,
        typer.Option(
            "--new-session-if-lost/--keep-session",
            help="When the agent cannot load its kept session after a restart: start a new "
            "one, or stay offline and say so.",
        ),
    ] = True,
    max_chars: Annotated[
        int,
        typer.Option("--max-chars", min=100, max=MAX_MESSAGE_CHARS, help="Longest message sent."),
    ] = MAX_MESSAGE_CHARS,
    as_json: JsonOption = False,
) -> None:
    """Start an ACP agent headless on this host's worker and register it: messages to it become
    ACP prompts, its permission requests approvals, its replies go to the chat that asked.

    Examples:

        agentcomms agents start docs --dir ~/src/docs --kind gemini

        agentcomms agents start api --dir ~/src/api --acp -- npx my-acp-agent --verbose
    """
    command = list(ctx.args)
    if acp == (kind is not None):
        fail(
            "say what to run: `--acp -- COMMAND [ARGS…]` for any ACP agent, or `--kind "
            "gemini|claude-code|codex` for a known one (not both)"
        )
    if acp and not command:
        fail("--acp needs the agent's command after `--`, e.g. `--acp -- gemini --acp`")
    if kind is not None:
        if command:
            fail(f"--kind {kind} runs its own command; drop {' '.join(command)!r} or use --acp")
        command = _kind_command(kind, host)
    resolved = folder.expanduser().resolve()
    if not resolved.is_dir() and host is None:
        fail(f"--dir {folder}: no such folder here; create it first, or name its --host")
    params: dict[str, Any] = {
        "agent_id": agent_id,
        "dir": str(resolved),
        "command": command,
        "new_session_if_lost": new_session_if_lost,
        "max_chars": max_chars,
    }
    if host:
        params["host"] = host
    result = ask("start_agent", **params)
    _print_result(
        result, as_json, f"started {agent_id}: {result['target']} in {resolved} on {result['host']}"
    )


@agents_app.command("stop")
def stop(
    agent_id: Annotated[str, typer.Argument(help="The process agent's id.")],
    as_json: JsonOption = False,
) -> None:
    """Stop a process agent: its process ends, its session is kept, and messages sent to it
    wait until it is started again."""
    result = ask("stop_agent", agent_id=agent_id)
    _print_result(result, as_json, f"stopped {agent_id}; its messages will wait")


@agents_app.command("clear")
def clear(
    agent_id: Annotated[str, typer.Argument(help="The process agent's id.")],
    as_json: JsonOption = False,
) -> None:
    """Start a new session for a process agent, as a chat's /clear does: a turn it is in is
    cancelled first, and its old session is left as it was (the agent keeps it).

    Example: agentcomms agents clear docs
    """
    result = ask("clear_agent", agent_id=agent_id, reason="`agentcomms agents clear`")
    _print_result(result, as_json, f"{agent_id} starts a new session ({result['event_id']})")


def _kind_command(kind: str, host: str | None) -> list[str]:
    from agentcomms.acp.kinds import KINDS, KindUnavailable, find, install, portable
    from agentcomms.config import host_name, load_sections
    from agentcomms.errors import ConfigError

    if kind not in KINDS:  # one the operator named in acp.kinds (agents.start.kinds)?
        try:
            own = load_sections(["acp", "agents"]).acp.kinds
        except ConfigError as exc:
            fail(str(exc))
        if kind in own:
            return list(own[kind])
        fail(f"unknown kind {kind!r}; known: {', '.join([*KINDS, *own])} (acp.kinds adds more)")
    if host is not None and host != host_name():
        # Another host's worker finds it there: nothing of this machine's is looked at.
        return portable(kind)
    try:
        found = find(kind)
        if found is not None:
            return found
        typer.echo(f"installing {kind} with npm (once)…", err=True)
        return install(kind)
    except KindUnavailable as exc:
        fail(str(exc))


@agents_app.command("peek")
def peek(
    agent_id: Annotated[str, typer.Argument(help="The agent's id.")],
    as_json: JsonOption = False,
) -> None:
    """Show what an agent is doing: its pane's screen as text, or a process agent's last reply.

    Invisible characters show as marks, as in approvals, so what you read is what is there.
    Example: agentcomms agents peek backend
    """
    result = ask("peek", agent_id=agent_id)
    if as_json:
        print_json(result)
        return
    if result["text"] is None:
        console.print(
            f"{agent_id} ({result['state']}) has not finished a turn since the gateway started"
        )
        return
    shown = f"pane {result['target']}" if result["shows"] == "pane" else "last reply"
    typer.echo(f"{agent_id} ({result['state']}), {shown}:\n{result['text']}")
