"""`agentcomms agents start` and `agents stop`: process agents, which agentcomms starts headless
and drives over ACP (the Agent Client Protocol) instead of typing into a pane."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from agentcomms.cli.agents_cmd import JsonOption, _print_result, agents_app
from agentcomms.cli.common import fail
from agentcomms.cli.output import ask
from agentcomms.limits import MAX_MESSAGE_CHARS


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
            "claude-code or codex (through Zed's ACP adapters); installed with npm, pinned, "
            "when missing.",
        ),
    ] = None,
    host: Annotated[
        str | None, typer.Option("--host", help="Host whose worker runs the agent.")
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
        command = _kind_command(kind)
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


def _kind_command(kind: str) -> list[str]:
    from agentcomms.acp.kinds import KindUnavailable, find, install

    try:
        found = find(kind)
        if found is not None:
            return found
        typer.echo(f"installing {kind} with npm (once)…", err=True)
        return install(kind)
    except KindUnavailable as exc:
        fail(str(exc))
