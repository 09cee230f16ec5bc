"""The never-list: tool calls refused at once, without asking anyone, by a blocking
``PreToolUse`` hook (Gemini CLI's ``BeforeTool``) (``agentcomms hook KIND --never RULE …``,
written by ``agentcomms install`` from ``approvals.never`` and the agent's own
``agents.ID.approvals.never``).

A rule is in the agents' own permission-rule syntax: ``Tool`` (every call of it) or
``Tool(pattern)``, where ``*`` stands for any text: ``Bash(rm -rf *)``, ``Write(/etc/*)``.
Claude Code runs the hook only for a call its own rule matching finds (the handler's ``if``),
so its own syntax decides there; for Codex and Gemini CLI, which run their hook for every call,
the hook matches here: a shell command matches when it, or any command it chains (``&&``,
``||``, ``;``, ``|``, a new line), matches the pattern; any other tool by its path (a relative
one also as the absolute path it names from the agent's folder), URL or pattern argument;
``domain:HOST`` by the host of any URL in it.

Codex (0.169) sends its shell as ``Bash`` (``{"command": …}``), as Claude Code does, and its file
edits as ``apply_patch``, the patch text as ``command``: a ``Write`` or ``Edit`` rule matches
every path the patch adds, updates, deletes or moves to, and a patch Codex's shell is given (Codex
runs ``apply_patch <<'EOF'`` as its own edit) likewise; ``Agent`` is its ``spawn_agent``, ``Read``
its ``view_image`` (:data:`CODEX_TOOLS`). What Codex sends no hook for no rule can stop: input
typed into a running command (``write_stdin``), and its web search, which OpenAI's servers run.

Gemini CLI's tools have names of their own: a rule names either one (``run_shell_command(rm
-rf *)``), or the tool the other agents call it (``Bash(rm -rf *)``), as in :data:`GEMINI_TOOLS`.
A rule naming a tool only one side has (Gemini's own names; Claude Code's tools Gemini has no
counterpart for) is written into the hooks of the agents that can have it alone
(:func:`rules_for`); any other tool (an MCP server's, say) may be any agent's.

Standard library only, and not even ``typing``: it runs inside the agent's loop, before each
call it may refuse.
"""

from __future__ import annotations

import os.path
import re

# Not `from typing import Any`: typing costs the hook process 2 ms before every Gemini tool call
# (measured); mypy reads this name as True, and the annotations are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

RULE = re.compile(r"^(?P<tool>[A-Za-z][A-Za-z0-9_.-]*)(?:\((?P<pattern>.+)\))?$", re.DOTALL)
RULE_CHARS = 500
# The argument a rule's pattern is matched against: the first of these the call has (Gemini
# CLI's list_directory names its folder dir_path, web_fetch its URLs inside a prompt).
SUBJECTS = (
    "command",
    "file_path",
    "path",
    "notebook_path",
    "url",
    "pattern",
    "query",
    "dir_path",
    "prompt",
)
# Arguments that are paths: a relative one is matched as given and as the absolute path.
_PATHS = ("file_path", "path", "notebook_path", "dir_path")
# Gemini CLI's tool for each tool name of the other agents' rules (Claude Code's; Codex's
# shell is Bash too). A rule naming Gemini's own tool applies to Gemini alone.
GEMINI_TOOLS = {
    "Bash": "run_shell_command",
    "Write": "write_file",
    "Edit": "replace",
    "Read": "read_file",
    "LS": "list_directory",
    "Glob": "glob",
    "Grep": "grep_search",
    "WebFetch": "web_fetch",
    "WebSearch": "google_web_search",
}
# Codex's tool for each tool name of the other agents' rules, where its own differs (0.169,
# codex-rs core/src/tools/hook_names.rs: Codex itself selects hooks matching Write or Edit for
# apply_patch, Agent for spawn_agent; Read for view_image is agentcomms', a file it reads).
CODEX_TOOLS = {
    "Write": "apply_patch",
    "Edit": "apply_patch",
    "Agent": "spawn_agent",
    "Read": "view_image",
}
# The tool rules whose pattern a Codex edit's paths are matched against.
_PATCHING = ("Write", "Edit", "apply_patch")
# A path a patch names: the file it adds, updates or deletes, or moves an updated one to.
_PATCH_PATHS = re.compile(
    r"^[ \t]*\*\*\* (?:Add File|Update File|Delete File|Move to): *(.+?)[ \t\r]*$", re.MULTILINE
)
_PATCH_BEGINS = re.compile(r"^[ \t]*\*\*\* Begin Patch", re.MULTILINE)
# A shell's patch given from another folder: `cd DIR && apply_patch <<'EOF'`.
_CD = re.compile(r"^\s*cd\s+(?P<q>['\"]?)(?P<dir>[^'\"\s]+)(?P=q)\s*&&")
# Gemini CLI's built-in tools (0.61.0, read from its bundle): a rule naming one applies to Gemini
# alone, the mapped ones too (the mapping is from the other agents' names, not back).
GEMINI_OWN = frozenset(
    {
        *GEMINI_TOOLS.values(),
        "read_many_files",
        "save_memory",
        "write_todos",
        "activate_skill",
        "ask_user",
        "enter_plan_mode",
        "exit_plan_mode",
        "invoke_agent",
        "complete_task",
        "get_internal_docs",
        "list_mcp_resources",
        "read_mcp_resource",
    }
)
# Claude Code's tools (2.1, read from its binary) that no Gemini tool stands for: a rule naming
# one can apply to Claude Code and Codex (by Claude Code's names, or CODEX_TOOLS'), never to Gemini.
CLAUDE_OWN = frozenset(
    {
        "NotebookEdit",
        "MultiEdit",
        "Task",
        "Agent",
        "TaskStop",
        "TodoWrite",
        "AskUserQuestion",
        "ExitPlanMode",
        "EnterPlanMode",
        "Skill",
        "KillShell",
        "BashOutput",
    }
)
_CHAINS = re.compile(r"&&|\|\||[;|\n]")
_HOSTS = re.compile(r"[a-z][a-z0-9+.-]*://(?:[^/?#@\s]*@)?([^/?#:\s]+)", re.IGNORECASE)


def rule_problem(rule: str) -> str | None:
    """What is wrong with a rule, for the config's error; None when it is one."""
    if not rule.strip() or len(rule) > RULE_CHARS or RULE.match(rule.strip()) is None:
        return (
            f"{rule!r} is not a rule: write a tool, or a tool and a pattern in the agents' "
            "rule syntax, e.g. 'Bash(rm -rf *)' or 'Write(/etc/*)' (at most "
            f"{RULE_CHARS} characters)"
        )
    return None


def rules_for(kind: str, rules: Iterable[str]) -> list[str]:
    """The rules that can apply to `kind`'s agent, as written: what its hooks refuse. Gemini's
    hook maps a rule in the other agents' names itself (:func:`matches`)."""
    return [r for r in rules if applies_to(kind, r)]


def applies_to(kind: str, rule: str) -> bool:
    """Whether `kind`'s agent can have the tool `rule` names (a rule that is none: left to the
    config's check, which names it)."""
    found = RULE.match(rule.strip())
    if found is None:
        return True
    tool = found["tool"]
    if kind == "gemini":
        return tool not in CLAUDE_OWN
    return tool not in GEMINI_OWN


def matches(
    rule: str, tool_name: str, tool_input: dict[str, Any], *, kind: str = "", cwd: str = ""
) -> bool:
    """Whether `rule` refuses this call of `kind`'s agent, run in the folder `cwd`."""
    found = RULE.match(rule.strip())
    if found is None:
        return False
    pattern = found["pattern"]
    if kind == "codex" and found["tool"] in _PATCHING:
        edited = _codex_edit(tool_name, tool_input, cwd)
        if edited is not None:
            if pattern is None or pattern.strip() == "*":
                return True
            glob = _glob(pattern.strip())
            return any(glob.fullmatch(p) for p in edited)
    if kind == "gemini":
        tool = GEMINI_TOOLS.get(found["tool"], found["tool"])
    elif kind == "codex":
        tool = CODEX_TOOLS.get(found["tool"], found["tool"])
    else:
        tool = found["tool"]
    if tool != tool_name:
        return False
    if pattern is None or pattern.strip() == "*":
        return True
    key = next((k for k in SUBJECTS if isinstance(tool_input.get(k), str)), None)
    if key is None:
        return False
    subject: str = tool_input[key]
    pattern = pattern.strip()
    if pattern.startswith("domain:"):
        parts = _HOSTS.findall(subject)
        pattern = pattern.removeprefix("domain:")
    elif key == "command":
        parts = [subject, *_CHAINS.split(subject)]
    elif key in _PATHS and cwd and not os.path.isabs(subject):
        parts = [subject, os.path.normpath(os.path.join(cwd, subject))]
    else:
        parts = [subject]
    glob = _glob(pattern)
    return any(glob.fullmatch(p.strip()) for p in parts)


def _codex_edit(tool_name: str, tool_input: dict[str, Any], cwd: str) -> list[str] | None:
    """The paths a Codex edit names, each relative one also as the absolute path it names
    (from the `cd` the shell's patch runs after, if any); None when the call edits nothing:
    neither ``apply_patch`` nor a shell command that gives one a patch."""
    patch = tool_input.get("command")
    if not isinstance(patch, str):
        return None
    folder = cwd
    if tool_name == "Bash":
        if _PATCH_BEGINS.search(patch) is None:
            return None
        moved = _CD.match(patch)
        if moved is not None:
            folder = os.path.join(cwd, moved["dir"]) if cwd else moved["dir"]
    elif tool_name != "apply_patch":
        return None
    paths = _PATCH_PATHS.findall(patch)
    if os.path.isabs(folder):
        paths += [os.path.normpath(os.path.join(folder, p)) for p in paths if not os.path.isabs(p)]
    return paths


def _glob(pattern: str) -> re.Pattern[str]:
    # Claude Code's prefix form "npm run:*" is "npm run*".
    pattern = pattern[:-2] + "*" if pattern.endswith(":*") else pattern
    return re.compile(".*".join(re.escape(p) for p in pattern.split("*")), re.DOTALL)


def refusal(rule: str) -> str:
    """What the model reads: why, and that no one will approve it."""
    return (
        f"Refused without asking: agentcomms' never-list has {rule}. No one can approve this "
        "call; do it another way, or ask your human to do it."
    )


def decide(
    kind: str, rules: list[str], payload: dict[str, Any], *, matched_by_agent: bool
) -> dict[str, Any] | None:
    """The ``PreToolUse`` (Gemini CLI: ``BeforeTool``) hook's output refusing the call, or
    None to let it go on. `matched_by_agent`: the agent ran this hook only for a call its own
    rule matching found."""
    tool_name = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    if not isinstance(tool_name, str):
        return None
    given = tool_input if isinstance(tool_input, dict) else {}
    cwd = payload.get("cwd")
    folder = cwd if isinstance(cwd, str) else ""
    hit = next((r for r in rules if matches(r, tool_name, given, kind=kind, cwd=folder)), None)
    if hit is None and matched_by_agent and len(rules) == 1:
        hit = rules[0]
    if hit is None:
        return None
    if kind == "gemini":
        # Gemini's BeforeTool answer: the call is blocked and the model reads the reason.
        return {"decision": "deny", "reason": refusal(hit)}
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": refusal(hit),
        }
    }
