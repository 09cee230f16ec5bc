"""Installing agentcomms into an agent's own configuration: its MCP server and its hooks.

Claude Code, Codex and Gemini CLI each read hooks of one shape (``{"hooks": {Event: [{"matcher"?,
"hooks": [{"type": "command", "command": …}]}]}}``) from their own file, and MCP servers from
another key or file. An install is a merge: a user's own hooks and servers stay as they are and
in their order, agentcomms' entries are recognised by their command (an ``agentcomms`` executable
running ``hook <agent>``, whatever its path, so a moved virtualenv is replaced, not doubled), a
second install changes nothing, and an uninstall removes exactly those entries (and a key or file
that only they filled). Every file is read and checked before any is written, so a broken file
stops the install with its name and line and nothing changed.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentcomms.agents.never import human_rules, rules_for
from agentcomms.agents.post_hook import posted_to
from agentcomms.agents.refusing import after_timeout
from agentcomms.errors import AgentConfigError

AgentKind = Literal["claude-code", "codex", "gemini"]
AGENT_KINDS: tuple[AgentKind, ...] = ("claude-code", "codex", "gemini")
AGENT_NAMES: dict[AgentKind, str] = {
    "claude-code": "Claude Code",
    "codex": "Codex",
    "gemini": "Gemini CLI",
}
SERVER_NAME = "agentcomms"
# A hook reports and returns at once; a hook stuck on a dead gateway must not hold the agent.
HOOK_TIMEOUT_S = 10
# The gateway answers a posted report at once; a gateway that hangs costs the agent this at most.
HTTP_HOOK_TIMEOUT_S = 2
# The permission hook outlives its approval by this much, so the approval's own timeout (leave
# the dialog to the terminal, or deny) is what the agent sees, not the hook's being killed.
APPROVAL_HOOK_MARGIN_S = 60

# Claude Code's events, and whether the hook may run beside the agent ("async"): around every
# tool call a synchronous hook costs 30 ms or more of the agent's time (measured).
CLAUDE_EVENTS: dict[str, bool] = {
    "SessionStart": False,
    "UserPromptSubmit": False,
    "PreToolUse": True,
    "PermissionRequest": False,
    "PostToolUse": True,
    "PostToolUseFailure": True,
    "Notification": False,
    "Stop": False,
    "StopFailure": False,
    "PreCompact": False,
    "SessionEnd": False,
}
# Codex's events. It waits for each hook unless it is marked "async" (0.171; 0.169 skipped those):
# the reports posted to the gateway's door are (install_agents._codex).
CODEX_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PreCompact",
    "Stop",
    "Interrupt",
    "SessionEnd",
)
# Gemini CLI asks for permission before BeforeTool runs; Notification tells of its dialog.
GEMINI_EVENTS = (
    "SessionStart",
    "BeforeAgent",
    "BeforeTool",
    "AfterTool",
    "Notification",
    "AfterAgent",
    "PreCompress",
    "SessionEnd",
)
# The versions whose hooks these files were written against (each reads every event above).
MIN_VERSIONS: dict[AgentKind, tuple[int, ...]] = {
    "claude-code": (2, 1, 328),
    "codex": (0, 171, 0),
    "gemini": (0, 61, 0),
}
BINARIES: dict[AgentKind, str] = {"claude-code": "claude", "codex": "codex", "gemini": "gemini"}
CODEX_TRUST_STEP = (
    "Codex runs new hooks only once you trust them: start `codex` and answer its "
    "'Hooks need review' with 'Trust all and continue' (or review them in `/hooks`)."
)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def agentcomms_argv() -> list[str]:
    """How to run this very agentcomms from anywhere: its absolute path (a virtualenv's works
    without activating it), or this Python with ``-m agentcomms``."""
    script = Path(sys.argv[0])
    if script.name == "agentcomms" and script.exists():
        return [str(script.absolute())]
    found = shutil.which("agentcomms")
    if found is not None:
        return [str(Path(found).absolute())]
    return [sys.executable, "-m", "agentcomms"]


def runs_agentcomms(tokens: list[str]) -> list[str] | None:
    """The arguments after the agentcomms executable in `tokens`, or None when `tokens` (after
    any ``timeout`` of `fail_closed`, and ``env VAR=value``) do not run agentcomms."""
    tokens = after_timeout(tokens)
    while tokens and (tokens[0] == "env" or _ASSIGNMENT.match(tokens[0])):
        tokens = tokens[1:]
    if len(tokens) >= 3 and tokens[1:3] == ["-m", "agentcomms"]:
        return tokens[3:]
    if tokens and Path(tokens[0]).name == "agentcomms":
        return tokens[1:]
    return None


def is_our_hook(command: object, kind: AgentKind) -> bool:
    """Whether a hook's command (a shell line, or an argv list for Codex's notify) is
    agentcomms' hook for `kind`, whichever agentcomms it names."""
    if isinstance(command, str):
        try:
            tokens = shlex.split(command)
        except ValueError:
            return False
    elif isinstance(command, list) and all(isinstance(t, str) for t in command):
        tokens = list(command)
    else:
        return False
    args = runs_agentcomms(tokens)
    return args is not None and args[:2] == ["hook", kind]


# The path of the gateway's loopback door for hook reports (gateway/agents/hook_http.py).
HOOK_URL_PATH = "/agentcomms/hook/"
# What the agent fills the report's headers from: the pane it runs in, or the agent it is.
HOOK_ENV_VARS = ["TMUX_PANE", "TMUX", "AGENTCOMMS_AGENT_ID"]
# Claude Code's events whose hook decides (the agent reads its answer): always a command, which
# fails closed; every other event only reports, and can be posted without a process.
DECIDING_EVENTS = frozenset({"PermissionRequest"})
# Not posted: Claude Code waits for every PreToolUse hook before it runs the tool (it may refuse
# it), and a posted one cost the agent +17 to +33 ms per call against +1 without (measured). The
# turn is busy from its prompt already, and each tool's end (PostToolUse) says so again.
UNPOSTED_EVENTS = frozenset({"PreToolUse"})


def hook_url(port: int, kind: AgentKind) -> str:
    return f"http://127.0.0.1:{port}{HOOK_URL_PATH}{kind}"


def is_our_http_hook(handler: object, kind: AgentKind) -> bool:
    """Whether a hook posts to an agentcomms gateway's loopback door for `kind`, whichever
    port it names."""
    if not isinstance(handler, dict) or handler.get("type") != "http":
        return False
    url = handler.get("url")
    return isinstance(url, str) and bool(
        re.fullmatch(rf"http://127\.0\.0\.1:\d{{1,5}}{re.escape(HOOK_URL_PATH + kind)}", url)
    )


def is_our_server(server: object) -> bool:
    if not isinstance(server, dict):
        return False
    command, args = server.get("command"), server.get("args") or []
    if not isinstance(command, str) or not isinstance(args, list):
        return False
    rest = runs_agentcomms([command, *[str(a) for a in args]])
    return rest is not None and rest[:1] == ["mcp"]


@dataclass(frozen=True)
class Target:
    """What to install: for which agent, where, as which agentcomms agent, run by what."""

    kind: AgentKind
    scope: Literal["user", "project"] = "user"
    agent_id: str | None = None
    home: Path = field(default_factory=Path.home)
    project: Path = field(default_factory=Path.cwd)
    argv: tuple[str, ...] = field(default_factory=lambda: tuple(agentcomms_argv()))
    codex_home: Path | None = None  # $CODEX_HOME, where Codex keeps its user configuration
    # The configured approvals.timeout_s: the permission hook waits that long for the human.
    approval_timeout_s: float = 600
    # The configured never-list (approvals.never and the agent's own): refused without asking.
    never: tuple[str, ...] = ()
    # Gemini CLI only (agents.ID.approvals.remote): its permissions are asked through agentcomms.
    remote_approvals: bool = False
    # agentcomms' own folder: with it, the never-list also refuses the human's commands and
    # that folder to the agent (`never.human_rules`), whatever the configuration lists.
    agentcomms_home: Path | None = None
    # Claude Code only: where the gateway takes hook reports over loopback HTTP, and the token
    # that proves them the user's own; None: every hook is a command.
    hook_url: str | None = None
    hook_token: str | None = None
    # Codex and Gemini CLI: the token's file, which their posting hooks read (never a command
    # line's word: every local user can read those); None: every hook is `agentcomms hook`.
    hook_token_file: Path | None = None

    def http_hook(self) -> dict[str, Any]:
        """A hook that posts its report to the gateway: no process started, and with the
        gateway down a refused connection the agent shrugs off at once."""
        assert self.hook_url is not None and self.hook_token is not None
        agent = self.agent_id or "$AGENTCOMMS_AGENT_ID"
        return {
            "type": "http",
            "url": self.hook_url,
            "headers": {
                "X-Agentcomms-Token": self.hook_token,
                "X-Agentcomms-Pane": "$TMUX_PANE",
                "X-Agentcomms-Tmux": "$TMUX",
                "X-Agentcomms-Agent": agent,
            },
            "allowedEnvVars": HOOK_ENV_VARS,
            "timeout": HTTP_HOOK_TIMEOUT_S,
        }

    def posts(self) -> bool:
        """Whether the reporting hooks post to the gateway's door (else `agentcomms hook`)."""
        if self.kind == "claude-code":
            return self.hook_url is not None and self.hook_token is not None
        return self.hook_url is not None and self.hook_token_file is not None

    def never_rules(self, configured: Sequence[str]) -> list[str]:
        """The rules this agent's hooks refuse: the human's, then `configured`, those of
        them this kind of agent can have."""
        human = human_rules(str(self.agentcomms_home)) if self.agentcomms_home else []
        return rules_for(self.kind, dict.fromkeys([*human, *configured]))

    def hook_argv(self) -> list[str]:
        prefix = ["env", f"AGENTCOMMS_AGENT_ID={self.agent_id}"] if self.agent_id else []
        return [*prefix, *self.argv, "hook", self.kind]

    def hook_command(self, never: Sequence[str] = (), *flags: str) -> str:
        """The hook's shell line; the agent id, when given, overrides finding it by the pane;
        `never`: the rules this hook refuses; `flags` follow the kind (``--remote-approvals``)."""
        prefix = f"AGENTCOMMS_AGENT_ID={shlex.quote(self.agent_id)} " if self.agent_id else ""
        rules = [a for rule in never for a in ("--never", rule)]
        return prefix + shlex.join([*self.argv, "hook", self.kind, *flags, *rules])

    def server(self) -> dict[str, Any]:
        server: dict[str, Any] = {"command": self.argv[0], "args": [*self.argv[1:], "mcp"]}
        if self.agent_id:
            server["env"] = {"AGENTCOMMS_AGENT_ID": self.agent_id}
        return server

    def base(self, folder: str) -> Path:
        """The agent's folder for this scope (``~/.claude``, ``<project>/.codex``…)."""
        if self.kind == "codex" and self.scope == "user" and self.codex_home is not None:
            return self.codex_home
        return (self.home if self.scope == "user" else self.project) / folder


@dataclass(frozen=True)
class FileChange:
    """One file's text before and after; None is "no file"."""

    path: Path
    before: str | None
    after: str | None

    def diff(self) -> str:
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            (self.after or "").splitlines(keepends=True),
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path) if self.after is not None else "/dev/null",
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@dataclass
class Plan:
    """The files an install (or uninstall) changes, and what the user must still do."""

    target: Target
    uninstall: bool
    changes: list[FileChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, path: Path, before: str | None, after: str | None) -> None:
        if before != after:
            self.changes.append(FileChange(path, before, after))

    def apply(self) -> None:
        from agentcomms.config.home import write_private_file

        for change in self.changes:
            if change.after is None:
                change.path.unlink(missing_ok=True)
            else:
                # 0600: these files may hold the user's tokens (Claude's OAuth, MCP env).
                write_private_file(change.path, change.after, overwrite=True)


# ---- files -----------------------------------------------------------------------------------


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentConfigError(f"cannot read {path}: {exc}; nothing was changed") from None


def load_json(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AgentConfigError(
            f"{path} line {exc.lineno}, column {exc.colno}: {exc.msg}: it is not valid JSON. "
            "Fix the file (or move it away) and run again; nothing was changed"
        ) from None
    if not isinstance(doc, dict):
        raise AgentConfigError(f"{path} does not hold a JSON object; nothing was changed")
    return doc


def dump_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def edit_json(plan: Plan, path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Apply `edit` to the JSON object in `path`; the file changes only when its data does (a
    user's formatting survives an install that has nothing to add)."""
    before = read_text(path)
    doc = load_json(path, before)
    original = copy.deepcopy(doc)
    edit(doc)
    if doc == original:
        return
    plan.add(path, before, dump_json(doc) if doc else None)  # emptied: as before it existed


def _shape(path: Path, where: str, value: object, kind: type) -> None:
    if not isinstance(value, kind):
        expected = "an object" if kind is dict else "a list"
        raise AgentConfigError(
            f"{path}: {where} is not {expected}, as the agent expects; fix it and run again; "
            "nothing was changed"
        )


# ---- hooks and servers in JSON ---------------------------------------------------------------


def merge_hooks(
    doc: dict[str, Any],
    path: Path,
    given: Mapping[str, dict[str, Any] | list[dict[str, Any]]],
    ours: Callable[[object], bool],
) -> None:
    """Make agentcomms' hook entries for each event in `given` (one, or a list) be there once
    each (none when `given` is empty), leaving every other hook as it is."""
    entries = {e: v if isinstance(v, list) else [v] for e, v in given.items()}
    hooks = doc.get("hooks")
    if hooks is None:
        if not entries:
            return
        hooks = doc["hooks"] = {}
    _shape(path, '"hooks"', hooks, dict)
    emptied = False
    for event in list(hooks):
        groups = hooks[event]
        _shape(path, f'"hooks.{event}"', groups, list)
        mine = [
            _entry(g, h) for g in groups if isinstance(g, dict) for h in _handlers(g) if ours(h)
        ]
        if mine == entries.get(event, []):
            continue
        kept = _without(groups, ours)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
            emptied = True
    for event, wanted in entries.items():
        groups = hooks.setdefault(event, [])
        if not any(ours(h) for g in groups if isinstance(g, dict) for h in _handlers(g)):
            groups.extend(_group(entry) for entry in wanted)
    if emptied and not hooks:
        del doc["hooks"]


# An entry's own key for the group it goes in: the agent runs it only for the tools matched.
MATCHER = "matcher"


def _entry(group: dict[str, Any], handler: Any) -> Any:
    """A handler as `merge_hooks` is given it: with its group's matcher, if it has one."""
    matcher = group.get(MATCHER)
    return {MATCHER: matcher, **handler} if matcher is not None else handler


def _group(entry: dict[str, Any]) -> dict[str, Any]:
    handler = {k: v for k, v in entry.items() if k != MATCHER}
    if MATCHER in entry:
        return {MATCHER: entry[MATCHER], "hooks": [handler]}
    return {"hooks": [handler]}


def _handlers(group: dict[str, Any]) -> list[Any]:
    handlers = group.get("hooks")
    return handlers if isinstance(handlers, list) else []


def _without(groups: list[Any], ours: Callable[[object], bool]) -> list[Any]:
    """`groups` without agentcomms' handlers; a group only they filled goes too."""
    kept = []
    for group in groups:
        handlers = _handlers(group) if isinstance(group, dict) else []
        left = [h for h in handlers if not ours(h)]
        if len(left) == len(handlers):
            kept.append(group)
        elif left:
            kept.append({**group, "hooks": left})
    return kept


def merge_server(doc: dict[str, Any], path: Path, key: str, server: dict[str, Any] | None) -> None:
    """Make ``doc[key]["agentcomms"]`` be `server` (absent when None); a server of that name
    that is not agentcomms is the user's, and is never replaced."""
    servers = doc.get(key)
    if servers is None:
        if server is None:
            return
        servers = doc[key] = {}
    _shape(path, f'"{key}"', servers, dict)
    current = servers.get(SERVER_NAME)
    if current is not None and not is_our_server(current):
        if server is None:
            return
        raise AgentConfigError(
            f"{path} already has an MCP server named {SERVER_NAME!r} that is not agentcomms "
            f"({json.dumps(current)[:120]}); rename or remove it, then run again; nothing was "
            "changed"
        )
    if server is None:
        if current is not None:
            del servers[SERVER_NAME]
            if not servers:
                del doc[key]
    elif current != server:
        servers[SERVER_NAME] = server


def command_hook(target: Target, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": target.hook_command(), **extra}


def our_hook(kind: AgentKind) -> Callable[[object], bool]:
    def ours(handler: object) -> bool:
        return isinstance(handler, dict) and (
            is_our_hook(handler.get("command"), kind)
            or is_our_http_hook(handler, kind)
            or posted_to(handler.get("command"), kind) is not None
        )

    return ours


def version_of(kind: AgentKind, binary: str | None = None) -> tuple[int, ...] | None:
    """The installed agent's version (from ``--version``), or None when it is not found."""
    import subprocess

    path = binary or shutil.which(BINARIES[kind])
    if path is None:
        return None
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(n) for n in found.groups()) if found else None


def format_version(version: Sequence[int]) -> str:
    return ".".join(str(n) for n in version)
