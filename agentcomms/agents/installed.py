"""What `doctor` finds of agentcomms in each agent's own configuration: its hooks there once for
every event, the agentcomms they run still there, the MCP server, the never-list they refuse the
same as the configured one and refused even when agentcomms fails, and the agent at or above the
version the hooks were written for. It reads; it changes nothing."""

from __future__ import annotations

import dataclasses
import itertools
import re
import shlex
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcomms.agents.install import (
    AGENT_KINDS,
    AGENT_NAMES,
    BINARIES,
    CLAUDE_EVENTS,
    CODEX_EVENTS,
    CODEX_TRUST_STEP,
    GEMINI_EVENTS,
    MIN_VERSIONS,
    SERVER_NAME,
    UNPOSTED_EVENTS,
    AgentKind,
    Plan,
    Target,
    format_version,
    is_our_hook,
    is_our_http_hook,
    is_our_server,
    load_json,
    read_text,
    runs_agentcomms,
    version_of,
)
from agentcomms.agents.install_agents import claude_files, codex_files, gemini_file
from agentcomms.agents.post_hook import posted_to
from agentcomms.agents.refusing import fails_closed
from agentcomms.errors import AgentConfigError

# Where each agent comes from, for the fix when it is missing.
NPM_PACKAGES: dict[AgentKind, str] = {
    "claude-code": "@anthropic-ai/claude-code@latest",
    "codex": "@openai/codex@latest",
    "gemini": "@google/gemini-cli@latest",
}

EVENTS: dict[AgentKind, tuple[str, ...]] = {
    "claude-code": tuple(CLAUDE_EVENTS),
    "codex": CODEX_EVENTS,
    "gemini": GEMINI_EVENTS,
}


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    # Worth knowing, not broken (doctor shows "!" and still exits 0).
    warn: bool = False


# The configured never-list for an agent (None: the hooks name no agent): `Config.never_rules`.
NeverFor = Callable[[str | None], list[str]]


def inspect_all(target: Target, never_for: NeverFor | None = None) -> list[Finding]:
    """Findings for every agent at both scopes (`target` says where home and project are);
    with `never_for`, whether the hooks refuse what the configuration lists."""
    findings: list[Finding] = []
    for kind in AGENT_KINDS:
        found: list[Finding] = []
        for scope in ("user", "project"):
            door = target.hook_url and f"{target.hook_url.rpartition('/')[0]}/{kind}"
            where = dataclasses.replace(target, kind=kind, scope=scope, hook_url=door or None)
            found += inspect(where, never_for)
        findings += found
        if found:  # installed somewhere
            findings += _hooks_switched_off(kind, target)
    return findings


def _hooks_switched_off(kind: AgentKind, target: Target) -> list[Finding]:
    """Each settings file that turns `kind`'s hooks off, where agentcomms is installed."""
    from agentcomms.agents.hooks_off import hooks_switched_off

    return [
        Finding(
            f"{kind} (effective) hooks-enabled",
            False,
            cause,
            "take that setting out of the file (or ask whoever manages it); the agent runs "
            "agentcomms' hooks again from its next start",
        )
        for cause in hooks_switched_off(kind, target.home, target.project)
    ]


def inspect(target: Target, never_for: NeverFor | None = None) -> list[Finding]:
    kind, name = target.kind, f"{target.kind} ({target.scope})"
    install = f"agentcomms install {kind}" + (
        " --scope project" if target.scope == "project" else ""
    )
    try:
        hooks, servers, files, untrusted = _read(target)
    except AgentConfigError as exc:
        return [Finding(f"{name} hooks", False, str(exc), f"fix the file, then `{install}`")]
    if not hooks and not servers:
        return []  # not installed here
    findings = []
    counts = Counter(event for event, _ in hooks)
    # Hooks that post their reports leave out those a post would slow down (install.py).
    posts = any(exe.startswith("http://") for _, exe in hooks)
    claude_posts = posts and kind == "claude-code"
    expected = [e for e in EVENTS[kind] if not (claude_posts and e in UNPOSTED_EVENTS)]
    missing = [e for e in expected if not counts[e]]
    doubled = [e for e in expected if counts[e] > 1]
    where = ", ".join(str(f) for f in files)
    if missing or doubled or not servers:
        problems = [f"hooks missing for {', '.join(missing)}"] if missing else []
        problems += [f"hooks present more than once for {', '.join(doubled)}"] if doubled else []
        problems += [] if servers else [f"no MCP server {SERVER_NAME!r}"]
        findings.append(
            Finding(f"{name} hooks", False, f"{'; '.join(problems)} in {where}", f"`{install}`")
        )
    else:
        detail = f"{len(expected)} hooks, each once, and the MCP server in {where}"
        findings.append(Finding(f"{name} hooks", True, detail))
    if untrusted:
        findings.append(
            Finding(
                f"{name} trust",
                False,
                f"Codex will not run the hooks for {', '.join(untrusted)} until you trust them",
                CODEX_TRUST_STEP,
            )
        )
    findings += _never_fails_open(target, name, install)
    if never_for is not None:
        findings += _never_list(target, name, install, never_for)
    posted = sorted({url for _, url in hooks if url.startswith("http://")})
    if target.hook_url is not None and posted and posted != [target.hook_url]:
        findings.append(
            Finding(
                f"{name} hook door",
                False,
                f"the hooks post to {', '.join(posted)}, but the gateway takes reports at "
                f"{target.hook_url} (server.hook_port): the agent's state is not heard",
                f"`{install}`",
            )
        )
    gone = sorted(
        {exe for _, exe in hooks if not exe.startswith("http://") and not Path(exe).exists()}
    )
    if gone:
        findings.append(
            Finding(
                f"{name} agentcomms",
                False,
                f"the hooks run {', '.join(gone)}, which is gone",
                f"`{install}`",
            )
        )
    findings.append(_version(kind, f"{name} version"))
    return findings


def _version(kind: AgentKind, name: str) -> Finding:
    needed = MIN_VERSIONS[kind]
    found = version_of(kind)
    if found is None:
        # Hooks installed for an agent this shell cannot start: the agent is elsewhere on PATH
        # (its version unchecked), or missing and nothing will run them.
        return Finding(
            name,
            True,
            f"`{BINARIES[kind]}` is not on PATH: {AGENT_NAMES[kind]} cannot be started from "
            "here and its version is unknown",
            f"install {AGENT_NAMES[kind]} (`npm install -g {NPM_PACKAGES[kind]}`) or add its "
            "folder to PATH",
            warn=True,
        )
    if found < needed:
        return Finding(
            name,
            False,
            f"{AGENT_NAMES[kind]} {format_version(found)} is older than "
            f"{format_version(needed)}, which the hooks were written for",
            f"update {AGENT_NAMES[kind]}",
        )
    return Finding(name, True, f"{AGENT_NAMES[kind]} {format_version(found)}")


def _read(target: Target) -> tuple[list[tuple[str, str]], bool, list[Path], list[str]]:
    """agentcomms' hooks as (event, the agentcomms it runs), whether its MCP server is there, the
    files read, and (Codex) the events whose hook the user never trusted."""
    plan = Plan(target, uninstall=False)
    kind = target.kind
    if kind == "claude-code":
        hooks_file, servers_file = claude_files(plan)
    elif kind == "codex":
        servers_file, hooks_file = codex_files(plan)
    else:
        hooks_file = servers_file = gemini_file(plan)
    hooks_doc = load_json(hooks_file, read_text(hooks_file))
    if kind == "codex":
        text = read_text(servers_file) or ""
        try:
            servers_doc: dict[str, Any] = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise AgentConfigError(f"{servers_file}: not valid TOML ({exc})") from None
        servers = servers_doc.get("mcp_servers", {})
        trust = servers_doc.get("hooks", {}).get("state", {})
    else:
        servers = load_json(servers_file, read_text(servers_file)).get("mcpServers", {})
        trust = None
    found: list[tuple[str, str]] = []
    untrusted: list[str] = []
    events = hooks_doc.get("hooks", {})
    for event, groups in events.items() if isinstance(events, dict) else []:
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            for h, handler in enumerate(group.get("hooks", []) if isinstance(group, dict) else []):
                command = handler.get("command") if isinstance(handler, dict) else None
                if is_our_http_hook(handler, kind):
                    found.append((event, handler["url"]))  # posted to a gateway: no program
                elif (url := posted_to(command, kind)) is not None:
                    found.append((event, url))  # posted by the agent's own shell
                    untrusted += _untrusted(trust, f"{hooks_file}:{_snake(event)}:{g}:{h}", event)
                elif is_our_hook(command, kind) and isinstance(command, str):
                    # A never-list handler beside the event's report (Claude Code's: each one
                    # with rules, by "if" or the shell's "matcher") is not a second report,
                    # nor is Gemini CLI's asking BeforeTool (remote approvals) beside the
                    # other tools' report.
                    words = shlex.split(command)
                    claude = kind == "claude-code"
                    refuses = "--never" in words and ("if" in handler or claude)
                    asks = "--remote-approvals" in words
                    label = f"{event} (never)" if refuses else f"{event} (asks)" if asks else event
                    found.append((label, _executable(command)))
                    untrusted += _untrusted(trust, f"{hooks_file}:{_snake(event)}:{g}:{h}", event)
    ours = isinstance(servers, dict) and is_our_server(servers.get(SERVER_NAME))
    return found, ours, sorted({hooks_file, servers_file}), untrusted


def _untrusted(trust: dict[str, Any] | None, key: str, event: str) -> list[str]:
    """[`event`] when Codex has no trust recorded for its hook (keyed by file, event and place)."""
    return [event] if trust is not None and "trusted_hash" not in trust.get(key, {}) else []


def _never_list(target: Target, name: str, install: str, never_for: NeverFor) -> list[Finding]:
    """The rules the installed hooks refuse against the configured ones for their agent that
    this kind of agent can have (install writes no other)."""
    installed, agent_id = _installed_never(target)
    wanted = target.never_rules(never_for(agent_id))
    if set(installed) == set(wanted):
        return []
    said = ", ".join(installed) or "nothing"
    return [
        Finding(
            f"{name} never-list",
            False,
            f"the hooks refuse {said}, the configuration lists {', '.join(wanted) or 'nothing'}",
            _install_again(install, agent_id),
        )
    ]


def _never_fails_open(target: Target, name: str, install: str) -> list[Finding]:
    """A never-list hook an older agentcomms wrote, which lets the call run when agentcomms
    fails (the agents take a hook's exit 1, or 127, as a warning), or hangs until the agent
    kills it (and runs the call)."""
    commands = _before_call_hooks(target)
    open_ = [c for c in commands if "--never" in shlex.split(c) and not fails_closed(c)]
    if not open_:
        return []
    agent_id = _agent_named(open_)
    return [
        Finding(
            f"{name} fail-closed",
            False,
            f"{len(open_)} of the hooks that refuse the never-list let the call run when "
            "agentcomms fails (crashed, or moved away) or hangs: an older agentcomms wrote them",
            _install_again(install, agent_id),
        )
    ]


def _install_again(install: str, agent_id: str | None) -> str:
    """The fix: the install command (for the agent its hooks name), in backticks, again."""
    return f"`{install}" + (f" --agent {agent_id}" if agent_id else "") + "` again"


def _installed_never(target: Target) -> tuple[list[str], str | None]:
    """The never-listed rules in agentcomms' PreToolUse hooks (Gemini CLI: BeforeTool, where
    the asking hook of remote approvals carries them too), and the agent they name."""
    commands = _before_call_hooks(target)
    rules = [
        r for c in commands for flag, r in itertools.pairwise(shlex.split(c)) if flag == "--never"
    ]
    return list(dict.fromkeys(rules)), _agent_named(commands)


def _before_call_hooks(target: Target) -> list[str]:
    """The commands of agentcomms' hooks before each call: PreToolUse (Gemini CLI: BeforeTool),
    where the never-list is refused."""
    plan = Plan(target, uninstall=False)
    if target.kind == "gemini":
        path, event = gemini_file(plan), "BeforeTool"
    else:
        path = claude_files(plan)[0] if target.kind == "claude-code" else codex_files(plan)[1]
        event = "PreToolUse"
    events = load_json(path, read_text(path)).get("hooks", {})
    groups = events.get(event, []) if isinstance(events, dict) else []
    commands: list[str] = []
    for group in groups if isinstance(groups, list) else []:
        for handler in group.get("hooks", []) if isinstance(group, dict) else []:
            command = handler.get("command") if isinstance(handler, dict) else None
            if isinstance(command, str) and is_our_hook(command, target.kind):
                commands.append(command)
    return commands


def _agent_named(commands: list[str]) -> str | None:
    """The agent the last of these hooks names (``AGENTCOMMS_AGENT_ID=``), if any."""
    agent_id = None
    for command in commands:
        tokens = shlex.split(command)
        named = [t.split("=", 1)[1] for t in tokens if t.startswith("AGENTCOMMS_AGENT_ID=")]
        agent_id = named[0] if named else agent_id
    return agent_id


def _snake(event: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def _executable(command: str) -> str:
    """The program a hook's command line starts (agentcomms, or the Python of ``-m agentcomms``)."""
    tokens = shlex.split(command)
    start = len(tokens) - len(runs_agentcomms(tokens) or []) - 1
    return tokens[start - 2] if tokens[start - 1 : start] == ["-m"] else tokens[start]
