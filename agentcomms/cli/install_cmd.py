"""`agentcomms install AGENT`: the MCP server and the hooks, merged into the agent's own files."""

from __future__ import annotations

import dataclasses
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentcomms.cli import app
from agentcomms.cli.common import fail, user_errors

if TYPE_CHECKING:
    from agentcomms.agents.install import AgentKind


class AgentKindOption(StrEnum):
    claude_code = "claude-code"
    codex = "codex"
    gemini = "gemini"


class ScopeOption(StrEnum):
    user = "user"
    project = "project"


@app.command()
def install(
    agent: Annotated[
        AgentKindOption,
        typer.Argument(help="The agent to install into: claude-code, codex, gemini."),
    ],
    agent_id: Annotated[
        str | None,
        typer.Option(
            "--agent",
            "-a",
            help="The agentcomms agent it is (sets AGENTCOMMS_AGENT_ID); else found by its pane.",
        ),
    ] = None,
    scope: Annotated[
        ScopeOption,
        typer.Option(
            "--scope", help="user (your home, every project) or project (this directory)."
        ),
    ] = ScopeOption.user,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would change; write nothing.")
    ] = False,
    uninstall: Annotated[
        bool, typer.Option("--uninstall", help="Remove exactly what install added.")
    ] = False,
    permission_mode: Annotated[
        str | None,
        typer.Option(
            "--permission-mode",
            help="Claude Code only: write permissions.defaultMode (default: tools ask through "
            "agentcomms; auto, Claude Code's own default, keeps approvals in the terminal; "
            "also acceptEdits, plan, dontAsk, bypassPermissions).",
        ),
    ] = None,
) -> None:
    """Install agentcomms into an agent: its MCP server (`agentcomms mcp`) and its hooks, which
    tell agentcomms when the agent is ready, busy or waiting on a dialog.

    Merges into the agent's own configuration (Claude Code: settings.json and ~/.claude.json or
    .mcp.json; Codex: config.toml and hooks.json; Gemini CLI: settings.json): your own hooks and
    servers stay, a second run changes nothing, and `--uninstall` removes only what it added.
    The hooks run this agentcomms by its absolute path, so a virtualenv works unactivated.

    Claude Code asks through agentcomms only in some permission modes (it tells which);
    `--permission-mode default` makes new sessions start in manual mode, where it does.
    """
    from agentcomms.agents.install import AGENT_NAMES, Target
    from agentcomms.agents.install_agents import plan
    from agentcomms.ids import check_agent_id

    if agent_id is not None:
        try:
            check_agent_id(agent_id)
        except ValueError as exc:
            fail(str(exc))
    codex_home = os.environ.get("CODEX_HOME")
    target = Target(
        kind=agent.value,
        scope=scope.value,
        agent_id=agent_id,
        codex_home=Path(codex_home) if codex_home else None,
        approval_timeout_s=_approval_timeout_s(),
        never=_never(agent_id),
        remote_approvals=agent.value == "gemini" and _remote_approvals(agent_id),
        agentcomms_home=_agentcomms_home(),
    )
    url, token = _reporting_door(target.kind, uninstall=uninstall)
    target = dataclasses.replace(target, hook_url=url, hook_token=token)
    if url is not None and agent is not AgentKindOption.claude_code:
        from agentcomms.hook_token import token_path

        # Codex's and Gemini CLI's posting hooks read the token from its file (made above).
        target = dataclasses.replace(target, hook_token=None, hook_token_file=token_path())
    mode = _permission_mode(agent, permission_mode, uninstall=uninstall)
    with user_errors():
        result = plan(target, uninstall=uninstall)
        if mode is not None:
            from agentcomms.agents.permission_mode import write_mode

            write_mode(result, mode)
        if not dry_run:
            result.apply()
    name = AGENT_NAMES[target.kind]
    where = f"{name} ({scope.value} scope)"
    files = ", ".join(str(c.path) for c in result.changes)
    if dry_run:
        for change in result.changes:
            sys.stdout.write(change.diff())
    if not result.changes:
        state = "not installed" if uninstall else "installed"
        print(f"{where}: nothing to change, agentcomms is {state}")
    elif dry_run:
        print(f"dry run, nothing written: {where} would change in {files}")
    elif uninstall:
        print(f"removed agentcomms from {where}: {files}")
    else:
        print(f"installed agentcomms into {where}: {files}")
    for note in result.notes:
        print(f"note: {note}")
    if agent_id is not None and not uninstall:
        _tell_unknown_agent(agent_id)
    if agent is AgentKindOption.claude_code and not uninstall:
        _tell_permission_mode(target.home, target.project)


def _permission_mode(agent: AgentKindOption, given: str | None, *, uninstall: bool) -> str | None:
    """The mode `--permission-mode` asks for, as Claude Code names it; a clear error when it
    cannot be written."""
    from agentcomms.agents.permission_mode import check_mode

    if given is None:
        return None
    if agent is not AgentKindOption.claude_code:
        fail(f"--permission-mode is Claude Code's setting; {agent.value} has none to write")
    if uninstall:
        fail("--permission-mode writes a setting and --uninstall removes agentcomms: use one")
    with user_errors():
        return check_mode(given)


def _tell_permission_mode(home: Path, project: Path) -> None:
    """Where Claude Code's approvals go in each mode, and in the mode it starts in here."""
    from agentcomms.agents.permission_mode import mode_notes

    with user_errors():
        notes = mode_notes(home, project)
    for note in notes:
        print(f"note: {note}")


def _tell_unknown_agent(agent_id: str) -> None:
    """Say so when the config read here has nothing of the agent's own: run as the agent's own
    Unix user, install reads that user's config, not the human's (closed to it)."""
    from agentcomms.config.reading import read_keys

    with user_errors():
        file, picked, _ = read_keys([("agents", agent_id)])
    if agent_id not in picked.get("agents", {}):
        print(
            f"note: {file.label} has no agents.{agent_id}, so none of its own settings "
            "(approvals.remote, its never-list) were installed; as the agent's own Unix user, "
            "this is that user's config: write them there and install again "
            "(docs: agents/own-user.md)"
        )


def _agentcomms_home() -> Path:
    """agentcomms' folder, which every agent's never-list keeps it out of."""
    from agentcomms.config.home import agentcomms_home

    return agentcomms_home().absolute()


def _reporting_door(kind: AgentKind, *, uninstall: bool) -> tuple[str | None, str | None]:
    """The reporting hooks post to the gateway's loopback door (``server.hook_port``) with this
    deployment's hook token, unless the config turns the door off."""
    if uninstall:
        return None, None
    from agentcomms.agents.install import hook_url
    from agentcomms.config import load_sections
    from agentcomms.hook_token import hook_token

    with user_errors():
        port = load_sections(["server"]).server.hook_port
        if port is None or port == 0:  # off, or a port chosen at start that no file can name
            return None, None
        return hook_url(port, kind), hook_token()


def _approval_timeout_s() -> float:
    """The configured ``approvals.timeout_s``, for the permission hook's own timeout."""
    from agentcomms.config.models import ApprovalsConfig
    from agentcomms.config.reading import read_keys

    default = ApprovalsConfig.model_fields["timeout_s"].default
    with user_errors():
        _, picked, _ = read_keys([("approvals", "timeout_s")])
    value = picked.get("approvals", {}).get("timeout_s", default)
    return float(value) if isinstance(value, int | float) else float(default)


def _remote_approvals(agent_id: str | None) -> bool:
    """The agent's ``approvals.remote`` (Gemini CLI asks through agentcomms)."""
    from agentcomms.config.reading import read_keys

    if agent_id is None:
        return False
    with user_errors():
        _, picked, _ = read_keys([("agents", agent_id, "approvals", "remote")])
    remote = picked.get("agents", {}).get(agent_id, {}).get("approvals", {}).get("remote")
    if remote is not None and not isinstance(remote, bool):
        fail(f"agents.{agent_id}.approvals.remote must be true or false")
    return bool(remote)


def _never(agent_id: str | None) -> tuple[str, ...]:
    """The configured never-list for this agent (everyone's, then its own), checked as the
    config checks it: a rule that is not one stops the install, named."""
    from agentcomms.agents.never import rule_problem
    from agentcomms.config.reading import read_keys

    wanted: list[tuple[str | int, ...]] = [("approvals", "never")]
    if agent_id is not None:
        wanted.append(("agents", agent_id, "approvals", "never"))
    with user_errors():
        _, picked, _ = read_keys(wanted)
    everyone = picked.get("approvals", {}).get("never", [])
    own = picked.get("agents", {}).get(agent_id, {}).get("approvals", {}).get("never", [])
    rules: list[str] = []
    for key, given in (("approvals.never", everyone), (f"agents.{agent_id}.approvals.never", own)):
        if not isinstance(given, list):
            fail(f'{key} must be a list of rules, e.g. ["Bash(rm -rf *)"]')
        for rule in given:
            problem = rule_problem(rule) if isinstance(rule, str) else f"{rule!r} is not text"
            if problem is not None:
                fail(f"{key}: {problem}")
            rules.append(rule.strip())
    return tuple(dict.fromkeys(rules))
