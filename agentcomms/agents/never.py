"""The never-list: tool calls refused at once, without asking anyone, by a blocking
``PreToolUse`` hook (Gemini CLI's ``BeforeTool``) (``agentcomms hook KIND --never RULE …``,
written by ``agentcomms install`` from ``approvals.never`` and the agent's own
``agents.ID.approvals.never``).

A rule is in the agents' own permission-rule syntax: ``Tool`` (every call of it) or
``Tool(pattern)``, where ``*`` stands for any text: ``Bash(rm -rf *)``, ``Write(/etc/*)``.
A shell command (``Bash``, Gemini's ``run_shell_command``) is read as the shell reads it
(:mod:`agentcomms.agents.never_shell`): the rule matches when any command the line runs does,
by its program's name whatever its folder, quoting or wrapper (``/bin/rm``, ``'rm'``, ``sudo rm``,
``bash -c 'rm …'``, ``$(rm …)``), with the rule's options in any order and grouping (``-rf``,
``-fr``, ``-r -f``, ``--recursive --force``) among others, and the rest of the rule's pattern
against the command's other words. A word computed as the line runs (``$X``) may be anything,
and a line that cannot be parsed, or a shell fed a script no one can read here (``curl … | sh``),
is refused: what cannot be checked is not allowed. The rule's text also still matches the line,
or any part of it between ``&&``, ``||``, ``;``, ``|`` and new lines, as a glob.
Any other tool matches by its paths (relative ones from the agent's folder; each also as the
real path it reaches, ``..`` and symbolic links resolved; Claude Code's ``//abs`` and ``~/``
forms too), URL or pattern argument; ``domain:HOST`` by the host of any URL in it, or of a
subdomain, without regard to case. Claude Code runs the never-list hook of each tool a rule
with a pattern names for every call of it, and a rule naming a tool alone only for that tool's
calls (the handler's ``if``). `install` adds :func:`human_rules` to every agent's list.

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

Standard library only (and tree-sitter, for a shell line), not even ``typing``: it runs inside
the agent's loop, before each call it may refuse.
"""

from __future__ import annotations

import os.path
import re

from agentcomms.agents.never_shell import as_glob, shell_hit, shell_matches
from agentcomms.agents.shell_commands import folders

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
# Claude Code's rule for one tool that stands for its kin: an Edit rule for every tool that
# edits files, a Read rule for every tool that reads them (each agent's own names for them
# through GEMINI_TOOLS and CODEX_TOOLS).
KIN = {
    "Edit": ("Write", "MultiEdit", "NotebookEdit"),
    "Read": ("Grep", "Glob", "LS"),
}
# The tool rules whose pattern a Codex edit's paths are matched against.
_PATCHING = ("Write", "Edit", "apply_patch")
# A path a patch names: the file it adds, updates or deletes, or moves an updated one to.
_PATCH_PATHS = re.compile(
    r"^[ \t]*\*\*\* (?:Add File|Update File|Delete File|Move to): *(.+?)[ \t\r]*$", re.MULTILINE
)
_PATCH_BEGINS = re.compile(r"^[ \t]*\*\*\* Begin Patch", re.MULTILINE)
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
# The tools whose `command` is a shell line (Codex's shell is Bash too).
SHELL_TOOLS = ("Bash", "run_shell_command")
# A URL's authority: what follows its scheme (a backslash is a slash to browsers and fetchers).
_AUTHORITIES = re.compile(r"[a-z][a-z0-9+.-]*:[/\\]{2}([^/?#\\\s]*)", re.IGNORECASE)
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


def rule_problem(rule: str) -> str | None:
    """What is wrong with a rule, for the config's error; None when it is one."""
    if not rule.strip() or len(rule) > RULE_CHARS or RULE.match(rule.strip()) is None:
        return (
            f"{rule!r} is not a rule: write a tool, or a tool and a pattern in the agents' "
            "rule syntax, e.g. 'Bash(rm -rf *)' or 'Write(/etc/*)' (at most "
            f"{RULE_CHARS} characters)"
        )
    return None


# The human's commands, which no agent may run for itself: answering its own requests, admitting
# a chat sender, dialling the phone menu (`agentcomms install` lists them for every agent).
HUMAN_COMMANDS = ("approve", "deny", "answer", "pair")


def human_rules(home: str) -> list[str]:
    """The rules `install` adds to every agent's never-list: the human's own commands, and
    agentcomms' folder `home` (its token, key and config), read or written by any tool."""
    import shlex

    rules = [f"Bash(agentcomms {c}:*)" for c in HUMAN_COMMANDS]
    rules.append("Bash(agentcomms phone --dial *)")
    # Any command with an operand in the folder (`cat ~/.agentcomms/console.token`).
    quoted = home if shlex.quote(home) == home else shlex.quote(home)
    rules.append(f"Bash(* *{quoted}*)")
    rules += [f"Read({home}/*)", f"Edit({home}/*)"]  # and their kin: search, list, write
    return rules


def rule_tool(rule: str) -> str | None:
    """The tool a rule names; None when it is not a rule."""
    found = RULE.match(rule.strip())
    return None if found is None else found["tool"]


def has_pattern(rule: str) -> bool:
    """Whether a rule names a pattern its tool's calls are matched against (not every call)."""
    found = RULE.match(rule.strip())
    return found is not None and found["pattern"] is not None and found["pattern"].strip() != "*"


def tools_of(tool: str) -> tuple[str, ...]:
    """The tools a rule naming `tool` refuses: it, and its kin (:data:`KIN`)."""
    return (tool, *KIN.get(tool, ()))


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
            # A relative path from a folder no one can know before the line runs: refused.
            return any(p is None or _path_matches(pattern.strip(), p, cwd) for p in edited)
    names = GEMINI_TOOLS if kind == "gemini" else CODEX_TOOLS if kind == "codex" else {}
    if tool_name not in {names.get(t, t) for t in tools_of(found["tool"])}:
        return False
    if pattern is None or pattern.strip() == "*":
        return True
    key = next((k for k in SUBJECTS if isinstance(tool_input.get(k), str)), None)
    if key is None:
        return False
    subject: str = tool_input[key]
    pattern = pattern.strip()
    if pattern.startswith("domain:"):
        wanted = _host(pattern.removeprefix("domain:"))
        # A URL argument without a scheme is fetched as https.
        schemed = key != "url" or _AUTHORITIES.match(subject.strip()) is not None
        hosts = _hosts(subject if schemed else f"https://{subject.strip()}")
        # Its subdomains too: whoever holds the domain serves them.
        glob = as_glob(wanted)
        labels = [h.split(".") for h in hosts]
        return any(glob.fullmatch(".".join(h[n:])) for h in labels for n in range(len(h)))

    if key == "command":
        # The folder the line starts in: Codex's workdir, Gemini CLI's dir_path, else cwd.
        given = tool_input.get("workdir") or tool_input.get("dir_path")
        start = os.path.join(cwd, given) if isinstance(given, str) else cwd
        if tool_name in SHELL_TOOLS and shell_matches(pattern, subject, start):
            return True
        parts = [subject, *_CHAINS.split(subject)]
    else:
        parts = [subject]
    # Every path the call names (Gemini's grep_search has a pattern and a folder).
    paths = [p for k in _PATHS if isinstance(p := tool_input.get(k), str)]
    if any(_path_matches(pattern, _absolute(p, cwd), cwd) for p in paths):
        return True
    if key in _PATHS:
        return False
    glob = as_glob(pattern)
    return any(glob.fullmatch(p.strip()) for p in parts)


def reason(rule: str, tool_name: str, tool_input: dict[str, Any]) -> str | None:
    """What a shell `rule` found in the call's line, for a person (`never check`); None for
    any other rule, or a line it refuses by its text alone."""
    found = RULE.match(rule.strip())
    line = tool_input.get("command")
    if found is None or found["tool"] not in SHELL_TOOLS or not has_pattern(rule):
        return None
    if tool_name not in SHELL_TOOLS or not isinstance(line, str):
        return None
    return shell_hit(found["pattern"].strip(), line)


def _absolute(path: str, cwd: str) -> list[str]:
    """A path as given, as the absolute path it names from `cwd`, and as the real path it
    reaches (``..`` and symbolic links resolved)."""
    seen = [path]
    named = os.path.expanduser(path)
    if not os.path.isabs(named):
        if not cwd:
            return seen
        named = os.path.join(cwd, named)
    seen += [os.path.normpath(named), os.path.realpath(named)]
    return list(dict.fromkeys(seen))


def _path_matches(pattern: str, paths: list[str] | str, cwd: str = "") -> bool:
    """Whether any of `paths` is one the rule's path `pattern` names, the pattern's own fixed
    folder also as the real folder it is (``/tmp`` is ``/private/tmp`` on macOS). Claude
    Code's ``//path`` is the absolute ``/path``, ``~/path`` is in the home folder, and
    ``./path`` is in the agent's folder."""
    if pattern.startswith("//"):
        pattern = pattern[1:]
    elif pattern.startswith("~"):
        pattern = os.path.expanduser(pattern)
    elif pattern.startswith("./") and cwd:
        pattern = os.path.join(cwd, pattern[2:])
    globs = [as_glob(pattern)]
    if pattern.endswith(("/*", "/**")):  # the folder itself too (a search in it)
        globs.append(as_glob(pattern.rstrip("*").rstrip("/")))
    if os.path.isabs(pattern):
        fixed = pattern.split("*", 1)[0]
        folder = os.path.dirname(fixed)
        real = os.path.realpath(folder)
        if real != folder:
            globs.append(as_glob(real + pattern[len(folder) :]))
    given = [paths] if isinstance(paths, str) else paths
    return any(g.fullmatch(p) for g in globs for p in given)


def _host(text: str) -> str:
    """A host as it is looked up: percent-escapes decoded, lower case, no final dot, and a
    name in other scripts or forms as its IDNA spelling (a fullwidth ``evil.com`` is ``evil.com``)."""
    decoded = _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), text).strip()
    if not decoded.isascii():
        try:
            decoded = decoded.encode("idna").decode("ascii")
        except UnicodeError:
            pass  # not a name IDNA can spell: matched as it is
    return decoded.lower().rstrip(".")


def _hosts(text: str) -> list[str]:
    """The host of every URL in `text` (after any user name, without port or brackets)."""
    hosts = []
    for authority in _AUTHORITIES.findall(text):
        host = authority.rsplit("@", 1)[-1]
        host = host[1:].split("]", 1)[0] if host.startswith("[") else host.split(":", 1)[0]
        hosts.append(_host(host))
    return hosts


def _codex_edit(tool_name: str, tool_input: dict[str, Any], cwd: str) -> list[str | None] | None:
    """The paths a Codex edit names, each relative one also as the absolute and real path it
    names from each folder the shell's patch may run in (its working folder, and every ``cd``
    before it; None: a folder no one can know before it runs); None when the call edits
    nothing: neither ``apply_patch`` nor a shell command that gives one a patch."""
    patch = tool_input.get("command")
    if not isinstance(patch, str):
        return None
    start = cwd
    workdir = tool_input.get("workdir")
    if isinstance(workdir, str) and workdir:
        start = os.path.join(cwd, workdir) if cwd else workdir
    places: list[str | None] = [start]
    if tool_name == "Bash":
        if _PATCH_BEGINS.search(patch) is None:
            return None
        places = folders(patch, start)
    elif tool_name != "apply_patch":
        return None
    named = _PATCH_PATHS.findall(patch)
    paths: list[str | None] = list(named)
    for path in named:
        if os.path.isabs(path):
            paths += [os.path.normpath(path), os.path.realpath(path)]
            continue
        for place in places:
            if place is None:
                paths.append(None)
            elif os.path.isabs(place):
                paths += _absolute(path, place)[1:]
    return paths


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
    # Claude Code matched the call to the one tool of this handler's rule ("if"); a rule with a
    # pattern has a handler for every call of its tool, and this module's matching decides.
    if hit is None and matched_by_agent and len(rules) == 1 and not has_pattern(rules[0]):
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
