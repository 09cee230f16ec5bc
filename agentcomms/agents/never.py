"""The never-list: tool calls refused at once, without asking anyone, by a blocking
``PreToolUse`` hook (``agentcomms hook KIND --never RULE …``, written by ``agentcomms install``
from ``approvals.never`` and the agent's own ``agents.ID.approvals.never``).

A rule is in the agents' own permission-rule syntax: ``Tool`` (every call of it) or
``Tool(pattern)``, where ``*`` stands for any text: ``Bash(rm -rf *)``, ``Write(/etc/*)``.
Claude Code runs the hook only for a call its own rule matching finds (the handler's ``if``),
so its own syntax decides there; for Codex, which runs every ``PreToolUse`` hook, the hook
matches here: a Bash command matches when it, or any command it chains (``&&``, ``||``, ``;``,
``|``, a new line), matches the pattern; any other tool by its path, URL or pattern argument.

Standard library only: it runs inside the agent's loop, before each call it may refuse.
"""

from __future__ import annotations

import re
from typing import Any

RULE = re.compile(r"^(?P<tool>[A-Za-z][A-Za-z0-9_.-]*)(?:\((?P<pattern>.+)\))?$", re.DOTALL)
RULE_CHARS = 500
# The argument a rule's pattern is matched against, per tool.
SUBJECTS = ("command", "file_path", "path", "notebook_path", "url", "pattern", "query")
_CHAINS = re.compile(r"&&|\|\||[;|\n]")


def rule_problem(rule: str) -> str | None:
    """What is wrong with a rule, for the config's error; None when it is one."""
    if not rule.strip() or len(rule) > RULE_CHARS or RULE.match(rule.strip()) is None:
        return (
            f"{rule!r} is not a rule: write a tool, or a tool and a pattern in the agents' "
            "rule syntax, e.g. 'Bash(rm -rf *)' or 'Write(/etc/*)' (at most "
            f"{RULE_CHARS} characters)"
        )
    return None


def matches(rule: str, tool_name: str, tool_input: dict[str, Any]) -> bool:
    found = RULE.match(rule.strip())
    if found is None or found["tool"] != tool_name:
        return False
    pattern = found["pattern"]
    if pattern is None or pattern.strip() == "*":
        return True
    glob = _glob(pattern.strip())
    subject = next((tool_input[k] for k in SUBJECTS if isinstance(tool_input.get(k), str)), None)
    if subject is None:
        return False
    parts = [subject, *_CHAINS.split(subject)] if "command" in tool_input else [subject]
    return any(glob.fullmatch(p.strip()) for p in parts)


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
    """The ``PreToolUse`` hook's output refusing the call, or None to let it go on.
    `matched_by_agent`: the agent ran this hook only for a call its own rule matching found."""
    tool_name = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    if not isinstance(tool_name, str):
        return None
    given = tool_input if isinstance(tool_input, dict) else {}
    hit = next((r for r in rules if matches(r, tool_name, given)), None)
    if hit is None and matched_by_agent and len(rules) == 1:
        hit = rules[0]
    if hit is None:
        return None
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": refusal(hit),
        }
    }
