"""`agentcomms hook <kind>`: what an agent's hooks run (the work is in agentcomms.agents.hook)."""

from __future__ import annotations

from typing import Annotated

import typer

from agentcomms.cli import app


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    hidden=False,
)
def hook(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="The agent: claude-code, codex or gemini.")],
) -> None:
    """Report one of the agent's hooks (JSON on stdin; Codex's notify passes it as an argument)
    to the gateway. Exits 0, gateway or not, and prints nothing but the agent's answer: it runs
    inside the agent's loop. `--never RULE` (written by `agentcomms install` from the
    never-list) refuses a matching call at once; for Gemini CLI, Bash(…) in a rule is its
    run_shell_command, and its own tool names work too."""
    from agentcomms.agents.hook import main

    raise typer.Exit(main([kind, *ctx.args]))
