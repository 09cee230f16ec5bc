"""``agentcomms never check AGENT TOOL INPUT``: whether the never-list refuses a call, and by
which rule, as the agent's hook would decide it."""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from agentcomms.agents.install import AgentKind

from agentcomms.cli import app
from agentcomms.cli.common import fail, print_json, shown
from agentcomms.cli.output import stdout

never_app = typer.Typer(
    name="never",
    no_args_is_help=True,
    help="""The never-list: tool calls refused at once, without asking anyone.

Rules are listed in the config, for every agent (approvals.never) and for one
(agents.ID.approvals.never), in the agents' own rule syntax: a tool (`WebFetch`)
or a tool and a pattern, where * is any text: `Bash(rm -rf *)`, `Write(/etc/*)`,
`WebFetch(domain:evil.com)`. `agentcomms install AGENT` writes them into the
agent's hooks, which refuse a matching call before it runs.

A shell rule matches every command a line runs (after ;, &&, |, inside $(...),
bash -c '...', sudo, env, xargs...), by its program whatever its folder or
quoting, with the rule's options in any order and grouping (-rf, -fr, -r -f,
--recursive --force). A path rule matches the real path a call reaches (.. and
symbolic links resolved); a domain rule the URL's host, case aside. A line that
cannot be read is refused.""",
)
app.add_typer(never_app, name="never")


class KindOption(StrEnum):
    claude_code = "claude-code"
    codex = "codex"
    gemini = "gemini"


# The argument a plain-text INPUT is, by tool (others: the command, a path, a URL…).
_PLAIN_INPUT = {
    "Bash": "command",
    "run_shell_command": "command",
    "apply_patch": "command",
    "WebFetch": "url",
    "web_fetch": "prompt",
    "WebSearch": "query",
    "google_web_search": "query",
    "Glob": "pattern",
    "Grep": "pattern",
    "glob": "pattern",
    "grep_search": "pattern",
    "list_directory": "dir_path",
    "LS": "path",
    "NotebookEdit": "notebook_path",
    "view_image": "path",
}
# Tool names only one agent has, which tell the agent kind when --kind is not given.
_CODEX_ONLY = frozenset({"apply_patch", "spawn_agent", "view_image"})


@never_app.command("check")
def check(
    agent: Annotated[
        str,
        typer.Argument(
            metavar="AGENT",
            help="The agentcomms agent whose list applies (approvals.never and its own "
            "agents.ID.approvals.never), e.g. backend.",
        ),
    ],
    tool: Annotated[
        str,
        typer.Argument(
            metavar="TOOL",
            help="The tool as the agent names it: Bash, Write, WebFetch, Gemini CLI's "
            "run_shell_command, Codex's apply_patch, an MCP tool…",
        ),
    ],
    tool_input: Annotated[
        str,
        typer.Argument(
            metavar="INPUT",
            help="The call's input: a JSON object as the hook receives it "
            '(\'{"file_path": "/etc/hosts"}\'), or plain text for the tool\'s main argument '
            "(Bash: the command line; Write/Edit/Read: the path; WebFetch: the URL); "
            "- reads it from standard input.",
        ),
    ],
    kind: Annotated[
        KindOption | None,
        typer.Option(
            "--kind",
            help="The agent program, whose tool names the rules are read with; default: "
            "gemini for Gemini CLI's tools, codex for Codex's, else claude-code.",
            show_default=False,
        ),
    ] = None,
    cwd: Annotated[
        str | None,
        typer.Option("--cwd", help="The agent's folder, for relative paths; default: this one."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Tell whether AGENT's never-list refuses this call, and by which rule: exit 0 when it is
    allowed, 1 when it is refused, 2 when the command is used wrongly.

    Examples:

        agentcomms never check backend Bash 'sudo rm -fr build'

        agentcomms never check backend Write ../../etc/hosts --cwd /srv/app

        agentcomms never check docs run_shell_command 'curl -s x | sh' --kind gemini
    """
    from agentcomms.agents.install import Target
    from agentcomms.agents.never import GEMINI_OWN, matches, reason, rule_problem
    from agentcomms.cli.install_cmd import _never as configured_never
    from agentcomms.config.home import agentcomms_home
    from agentcomms.ids import check_agent_id

    try:
        check_agent_id(agent)
    except ValueError as exc:
        fail(f"{exc}; name the agent as its config does (agents.ID)", code=2)
    if rule_problem(f"{tool}") is not None or "(" in tool:
        fail(f"{tool!r} is not a tool name: give it as the agent names it, e.g. Bash", code=2)
    given = _input(tool, sys.stdin.read() if tool_input == "-" else tool_input)
    agent_kind = kind.value if kind else _kind_of(tool, GEMINI_OWN)
    folder = os.path.abspath(cwd) if cwd else os.getcwd()
    try:
        configured = configured_never(agent)
    except typer.Exit:  # the config's error is said; 1 would read as "refused"
        raise typer.Exit(2) from None
    # As `install` writes them: the human's own commands and folder first, for every agent.
    target = Target(agent_kind, agentcomms_home=agentcomms_home().absolute())
    rules = target.never_rules(configured)
    hit = next((r for r in rules if matches(r, tool, given, kind=agent_kind, cwd=folder)), None)
    because = reason(hit, tool, given) if hit is not None else None
    if as_json:
        print_json({"refused": hit is not None, "rule": hit, "because": because, "rules": rules})
    elif hit is not None:
        said = f"refused by {shown(hit)}"
        stdout().print(said + (f": {shown(because)}" if because else ""), markup=False)
    else:
        stdout().print(f"allowed: none of {len(rules)} rules refuses it", markup=False)
    raise typer.Exit(1 if hit is not None else 0)


def _kind_of(tool: str, gemini_tools: frozenset[str]) -> AgentKind:
    if tool in gemini_tools:
        return "gemini"
    return "codex" if tool in _CODEX_ONLY else "claude-code"


def _input(tool: str, text: str) -> dict[str, Any]:
    """The call's input: a JSON object as given, or the text as the tool's main argument."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except ValueError as exc:
            fail(f"INPUT starts with {{ but is not a JSON object ({exc}); quote it whole", code=2)
        if not isinstance(value, dict):
            fail("INPUT must be a JSON object, or plain text", code=2)
        return value
    return {_PLAIN_INPUT.get(tool, "command" if tool.startswith("mcp__") else "file_path"): text}
