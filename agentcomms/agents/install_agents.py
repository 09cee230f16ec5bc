"""Where each agent reads its MCP servers and hooks, and how agentcomms' entries look there.

- Claude Code: hooks in ``settings.json`` (``~/.claude/`` or the project's ``.claude/``); the MCP
  server in ``~/.claude.json`` (user scope) or the project's ``.mcp.json``.
- Codex: ``config.toml`` (``[mcp_servers.agentcomms]`` and ``notify``) and ``hooks.json`` beside
  it (``~/.codex/``, or ``$CODEX_HOME``, or the project's ``.codex/``). Codex runs a new hook only
  once the user trusted it, which only the user may do.
- Gemini CLI: ``settings.json`` (``~/.gemini/`` or the project's ``.gemini/``) holds both; its
  hook timeouts are in milliseconds. With remote approvals, a policy file in
  ``~/.gemini/policies/`` too (Gemini CLI reads no project's policies).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions
from tomlkit.items import Table

from agentcomms.agents.install import (
    AGENT_NAMES,
    APPROVAL_HOOK_MARGIN_S,
    CLAUDE_EVENTS,
    CODEX_EVENTS,
    CODEX_TRUST_STEP,
    DECIDING_EVENTS,
    GEMINI_EVENTS,
    HOOK_TIMEOUT_S,
    SERVER_NAME,
    UNPOSTED_EVENTS,
    Plan,
    Target,
    command_hook,
    edit_json,
    is_our_hook,
    is_our_server,
    merge_hooks,
    merge_server,
    our_hook,
    read_text,
)
from agentcomms.agents.never import has_pattern, rule_tool, tools_of
from agentcomms.agents.post_hook import post_hook
from agentcomms.agents.refusing import fail_closed
from agentcomms.errors import AgentConfigError


def claude_files(plan: Plan) -> tuple[Path, Path]:
    """Claude Code's hooks file and MCP servers file for the plan's scope."""
    target = plan.target
    if target.scope == "user":
        return target.base(".claude") / "settings.json", target.home / ".claude.json"
    return target.base(".claude") / "settings.json", target.project / ".mcp.json"


# What Claude reads when a never-list handler failed (exit 2 blocks the call it matched).
NEVER_UNCHECKED = "agentcomms could not check this call against its never-list, so it is refused"


def _never_checked(command: str, never: tuple[str, ...]) -> str:
    """A hook that checks the never-list refuses the call when it fails; without one, its
    failure (or its hang past the agent's timeout) lets the call go on as if agentcomms were
    not installed."""
    return fail_closed(command, NEVER_UNCHECKED, HOOK_TIMEOUT_S) if never else command


def _claude(plan: Plan) -> None:
    target = plan.target
    settings, servers = claude_files(plan)
    entries: dict[str, dict[str, Any] | list[dict[str, Any]]] = {}
    if not plan.uninstall:
        for event, run_beside in CLAUDE_EVENTS.items():
            extra = {"async": True} if run_beside else {}
            timeout = HOOK_TIMEOUT_S
            if event == "PermissionRequest":  # it waits for the human's answer
                timeout = int(target.approval_timeout_s) + APPROVAL_HOOK_MARGIN_S
            if target.hook_url is None or event in DECIDING_EVENTS:
                entries[event] = command_hook(target, timeout=timeout, **extra)
            elif event not in UNPOSTED_EVENTS:
                entries[event] = target.http_hook()
        if target.never:
            # The report runs for every call: its failure must not stop them all.
            report = (
                []
                if target.hook_url is not None
                else [command_hook(target, timeout=HOOK_TIMEOUT_S, **{"async": True})]
            )
            entries["PreToolUse"] = [*report, *_claude_refusals(target)]
    edit_json(
        plan, settings, lambda doc: merge_hooks(doc, settings, entries, our_hook("claude-code"))
    )
    server = None if plan.uninstall else {"type": "stdio", **target.server()}
    edit_json(plan, servers, lambda doc: merge_server(doc, servers, "mcpServers", server))
    if target.scope == "project" and not plan.uninstall:
        plan.notes.append(
            "Claude Code asks once before it starts the MCP servers of a project's .mcp.json: "
            f"approve {SERVER_NAME!r} when it does."
        )


def _claude_refusals(target: Target) -> list[dict[str, Any]]:
    """The blocking handlers that refuse Claude Code's never-listed calls. The rules with a
    pattern share one handler per tool, run for every call of it ("matcher"), where
    agentcomms reads the call itself: Claude's own rule matching takes ``rm -fr`` or
    ``sudo rm -rf`` for another command than ``rm -rf``, and a path through ``..`` or a
    symbolic link for another path. A rule naming a tool alone has a handler Claude runs only
    for that tool ("if"), and other calls cost nothing. A handler that fails refuses the call
    it was run for."""
    by_tool: dict[str, list[str]] = {}
    for rule in target.never:
        tool = rule_tool(rule)
        if tool is not None and has_pattern(rule):
            # An Edit rule is every editing tool's, as in Claude's own rules (never.KIN).
            by_tool.setdefault("|".join(tools_of(tool)), []).append(rule)
    refusals: list[dict[str, Any]] = [
        {
            "matcher": tool,
            "type": "command",
            "command": _never_checked(target.hook_command(rules), tuple(rules)),
            "timeout": HOOK_TIMEOUT_S,
        }
        for tool, rules in by_tool.items()
    ]
    refusals += [
        {
            "type": "command",
            "command": _never_checked(target.hook_command([r]), (r,)),
            "if": r,
            "timeout": HOOK_TIMEOUT_S,
        }
        for r in target.never
        if not has_pattern(r)
    ]
    return refusals


def _report(target: Target, **extra: Any) -> dict[str, Any]:
    """A hook that only reports: posted to the gateway's door by the shell Codex or Gemini CLI
    starts for it when the door is on (no Python around a tool call), else `agentcomms hook`."""
    if target.posts():
        return post_hook(target, **extra)
    return command_hook(target, **extra)


def codex_files(plan: Plan) -> tuple[Path, Path]:
    base = plan.target.base(".codex")
    return base / "config.toml", base / "hooks.json"


def _codex(plan: Plan) -> None:
    target = plan.target
    config, hooks = codex_files(plan)
    _codex_config(plan, config)
    entries: dict[str, dict[str, Any]] = {}
    if not plan.uninstall:
        entries = {e: _report(target, timeout=HOOK_TIMEOUT_S) for e in CODEX_EVENTS}
        if target.posts():
            # Codex waits for a hook unless it runs in the background, and starts each through
            # a login shell: +275 ms per tool call waited for against none (measured). A report
            # carries its start, so one that arrives late is ordered still. Codex runs
            # SessionEnd's in its loop anyway.
            for event, entry in entries.items():
                if event != "SessionEnd":
                    entry["async"] = True
        # Codex runs its hooks one after the other anyway: with a never-list, its one
        # PreToolUse hook also refuses the never-listed calls. Codex runs a call whose hook
        # exited 1 or 127, so that hook fails closed: a crashed or missing agentcomms stops
        # every call rather than let a never-listed one run.
        if target.never or not target.posts():
            entries["PreToolUse"] = {
                "type": "command",
                "command": _never_checked(target.hook_command(target.never), target.never),
                "timeout": HOOK_TIMEOUT_S,
            }
        # Codex's permission hook waits for the human's answer, as Claude Code's does.
        entries["PermissionRequest"] = command_hook(
            target, timeout=int(target.approval_timeout_s) + APPROVAL_HOOK_MARGIN_S
        )
    edit_json(plan, hooks, lambda doc: merge_hooks(doc, hooks, entries, our_hook("codex")))
    if not plan.uninstall and any(c.path == hooks for c in plan.changes):
        plan.notes.append(CODEX_TRUST_STEP)
    if target.scope == "project" and not plan.uninstall:
        plan.notes.append(
            f"Codex reads {config.parent} only for a trusted project: trust {target.project} "
            "when Codex asks."
        )


def _codex_config(plan: Plan, path: Path) -> None:
    """``[mcp_servers.agentcomms]`` and ``notify`` in Codex's config.toml, through tomlkit so
    that the user's comments and layout stay as they were."""
    before = read_text(path)
    try:
        doc = tomlkit.parse(before or "")
    except tomlkit.exceptions.ParseError as exc:
        raise AgentConfigError(
            f"{path} line {exc.line}, column {exc.col}: it is not valid TOML ({exc}). Fix the "
            "file (or move it away) and run again; nothing was changed"
        ) from None
    original = doc.unwrap()
    target = plan.target
    servers = doc.get("mcp_servers")
    if servers is not None and not isinstance(servers, Table):
        raise AgentConfigError(f"{path}: mcp_servers is not a table; nothing was changed")
    current = servers.get(SERVER_NAME) if servers is not None else None
    if plan.uninstall:
        if servers is not None and current is not None and is_our_server(_plain(current)):
            del servers[SERVER_NAME]
            if not servers:
                del doc["mcp_servers"]
    else:
        if current is not None and not is_our_server(_plain(current)):
            raise AgentConfigError(
                f"{path} already has an MCP server named {SERVER_NAME!r} that is not "
                "agentcomms; rename or remove it, then run again; nothing was changed"
            )
        wanted = target.server()
        if current is None or _plain(current) != wanted:
            table = tomlkit.table()
            for key, value in wanted.items():
                table[key] = _inline(value) if isinstance(value, dict) else value
            if servers is None:
                servers = tomlkit.table(is_super_table=True)
                doc["mcp_servers"] = servers
            servers[SERVER_NAME] = table
    _codex_notify(plan, path, doc)
    if doc.unwrap() != original:
        # tomlkit parts tables with a blank line; one left at the end by a removed table goes.
        after = tomlkit.dumps(doc).rstrip("\n")
        plan.add(path, before, after + "\n" if after.strip() else None)


def _codex_notify(plan: Plan, path: Path, doc: tomlkit.TOMLDocument) -> None:
    """Codex runs one ``notify`` program at the end of each turn: agentcomms' when the slot is
    free; a user's own is never replaced (the Stop hook tells the same)."""
    notify = doc.get("notify")
    current = _plain(notify) if notify is not None else None
    ours = current is not None and is_our_hook(current, "codex")
    if plan.uninstall:
        if ours:
            del doc["notify"]
    elif current is None or ours:
        wanted = plan.target.hook_argv()
        if current != wanted:
            doc["notify"] = wanted
    else:
        plan.notes.append(
            f"{path} already has notify = {current!r}; agentcomms left it as it is (its Stop "
            "hook tells the end of a turn)."
        )


def _plain(item: Any) -> Any:
    return item.unwrap() if hasattr(item, "unwrap") else item


def _inline(value: dict[str, Any]) -> Any:
    table = tomlkit.inline_table()
    table.update(value)
    return table


def gemini_file(plan: Plan) -> Path:
    return plan.target.base(".gemini") / "settings.json"


def gemini_policy_file(plan: Plan) -> Path:
    # The user's tier: Gemini CLI 0.61 ignores a workspace's own policies.
    return plan.target.home / ".gemini" / "policies" / "agentcomms-remote-approvals.toml"


# The tools Gemini CLI asks permission for in its default mode; with remote approvals they are
# asked through agentcomms instead (read-only tools never ask).
GEMINI_ASKING_TOOLS = ("run_shell_command", "write_file", "replace", "web_fetch")
_ASKING = "|".join(GEMINI_ASKING_TOOLS)
_POLICY_MARK = "# Written by `agentcomms install gemini`"
# Gemini CLI 0.61 runs BeforeTool hooks before its policy and its dialog, and a hook's "allow"
# does not skip the dialog: this rule does, for the asking tools, while agentcomms' BeforeTool
# hook asks the human (its "ask" brings Gemini's own dialog back). Plan mode keeps its own
# rules; redirections would otherwise still ask.
GEMINI_POLICY = f"""{_POLICY_MARK} (agents.ID.approvals.remote): Gemini CLI's
# own permission dialog is skipped for these tools because agentcomms' BeforeTool hook asks the
# human instead, and answers "ask" (this dialog) when agentcomms cannot be reached.
# `agentcomms install gemini --uninstall`, or approvals.remote off, removes this file.
[[rule]]
toolName = [{", ".join(f'"{t}"' for t in GEMINI_ASKING_TOOLS)}]
decision = "allow"
priority = 900
modes = ["default", "autoEdit"]
allowRedirection = true
"""


def _gemini(plan: Plan) -> None:
    target = plan.target
    path = gemini_file(plan)
    entries: dict[str, dict[str, Any] | list[dict[str, Any]]] = {}
    # Gemini CLI reads policies from the user's folder only: the remote approvals go with the
    # user scope, so a project's install never touches a policy the user's install wrote.
    user = target.scope == "user"
    remote = target.remote_approvals and not plan.uninstall and user
    # Gemini runs its BeforeTool hook, blocking, before every call anyway: it also refuses the
    # never-listed calls. Gemini takes its exit 1 (a Python error) as a warning and runs the
    # call, so with a never-list it fails closed: a crashed agentcomms stops every call rather
    # than let a never-listed one run.
    report = {
        "name": SERVER_NAME,
        **command_hook(target, timeout=HOOK_TIMEOUT_S * 1000),
        "command": _never_checked(target.hook_command(target.never), target.never),
    }
    if not plan.uninstall:
        entries = {
            e: {"name": SERVER_NAME, **_report(target, timeout=HOOK_TIMEOUT_S * 1000)}
            for e in GEMINI_EVENTS
        }
        if target.never or remote or not target.posts():
            entries["BeforeTool"] = report
    if remote:
        # The asking tools' BeforeTool waits for the human; every other tool's only reports.
        # Gemini takes a hook's exit 1 (a Python error) as a warning and goes on, which would
        # let the policy's allow run the call: any failure blocks it instead (exit 2, the
        # reason on stderr).
        # It gives up, refusing, a little before Gemini's long timeout would let the call run.
        wait_s = int(target.approval_timeout_s) + APPROVAL_HOOK_MARGIN_S
        asking = fail_closed(
            target.hook_command(target.never, "--remote-approvals"),
            "agentcomms could not ask the human for this tool call",
            wait_s,
        )
        entries["BeforeTool"] = [
            {"matcher": f"^(?!({_ASKING})$)", **report},
            {"matcher": f"^({_ASKING})$", **report, "command": asking, "timeout": wait_s * 1000},
        ]
    elif target.remote_approvals and not plan.uninstall:
        plan.notes.append(
            "remote approvals were not installed: Gemini CLI reads policies only from "
            "~/.gemini/policies, so they need the user scope (without --scope project)."
        )
    server = None if plan.uninstall else target.server()

    def edit(doc: dict[str, Any]) -> None:
        merge_server(doc, path, "mcpServers", server)
        merge_hooks(doc, path, entries, our_hook("gemini"))

    edit_json(plan, path, edit)
    if user:
        _gemini_policy(plan, remote)


def _gemini_policy(plan: Plan, remote: bool) -> None:
    """The policy rule that skips Gemini's own dialog, there exactly when remote approvals are;
    a file of that name that is not agentcomms' is never touched."""
    policy = gemini_policy_file(plan)
    before = read_text(policy)
    if before is not None and not before.startswith(_POLICY_MARK):
        if remote:
            raise AgentConfigError(
                f"{policy} exists and is not agentcomms'; move it away and run again; nothing "
                "was changed"
            )
        return
    plan.add(policy, before, GEMINI_POLICY if remote else None)
    if remote and any(c.path == policy for c in plan.changes):
        plan.notes.append(
            "Gemini CLI asks no more in its own dialog for "
            f"{', '.join(GEMINI_ASKING_TOOLS)}: agentcomms asks you (`agentcomms approvals`)."
        )


PLANNERS: dict[str, Callable[[Plan], None]] = {
    "claude-code": _claude,
    "codex": _codex,
    "gemini": _gemini,
}


def plan(target: Target, *, uninstall: bool = False) -> Plan:
    """What installing (or uninstalling) agentcomms into `target`'s agent would change; nothing
    is written until ``apply``."""
    # Only the never-listed rules this agent can have: another agent's tool in a Claude Code
    # handler's "if", or in a hook's arguments, would never match anything.
    kept = tuple(target.never_rules(target.never))
    left_out = [r for r in target.never if r not in kept]
    target = dataclasses.replace(target, never=kept)
    result = Plan(target, uninstall)
    if left_out and not uninstall:
        result.notes.append(
            f"the never-list's {', '.join(left_out)} names another agent's tool, which "
            f"{AGENT_NAMES[target.kind]} does not have: not written into its hooks."
        )
    PLANNERS[target.kind](result)
    return result
