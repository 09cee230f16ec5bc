"""Whether an agent's effective settings switch its hooks off, and which file does it.

Hooks are how agentcomms learns what an agent does, and the never-list's only gate: an agent
whose settings turn them off runs every call unseen and unrefused, with no error anywhere. A
repository can do it with its own settings file, so `doctor` reads every file the agent merges:

- Claude Code: ``disableAllHooks`` in the user's ``~/.claude/settings.json``, the project's
  ``.claude/settings.json`` and ``.claude/settings.local.json``, and the managed settings
  (where ``allowManagedHooksOnly`` also leaves only the managed hooks); the file of the
  highest precedence that sets it decides (managed, local, project, user).
- Gemini CLI: ``hooksConfig.enabled`` in its system defaults, the user's
  ``~/.gemini/settings.json``, the project's ``.gemini/settings.json`` and the system settings
  (the last that sets it decides), and ``hooksConfig.disabled``, the hooks each file switches
  off by name or command (the files' lists add up).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

# The administrator's files, which outrank the user's and the project's.
CLAUDE_MANAGED = (
    Path("/Library/Application Support/ClaudeCode/managed-settings.json")
    if sys.platform == "darwin"
    else Path("/etc/claude-code/managed-settings.json")
)
GEMINI_SYSTEM = Path(
    os.environ.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
    or (
        "/Library/Application Support/GeminiCli/settings.json"
        if sys.platform == "darwin"
        else "/etc/gemini-cli/settings.json"
    )
)
GEMINI_SYSTEM_DEFAULTS = Path(
    os.environ.get("GEMINI_CLI_SYSTEM_DEFAULTS_PATH")
    or GEMINI_SYSTEM.parent / "system-defaults.json"
)


def hooks_switched_off(kind: str, home: Path, project: Path) -> list[str]:
    """What switches `kind`'s hooks off for the user `home` working in `project`, one sentence
    per cause naming its file; empty when nothing does."""
    if kind == "claude-code":
        return _claude(home, project)
    if kind == "gemini":
        return _gemini(home, project)
    return []


def _settings(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """A settings file's object (None when there is none), or why it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path} cannot be read ({exc}), so whether it turns hooks off is unknown"
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError:
        # Gemini CLI allows comments in its settings; the standard library's JSON does not.
        doc = _without_comments(text)
        if doc is None:
            unread = (
                f"{path} is not JSON agentcomms can read: whether it turns hooks off is unknown"
            )
            return None, unread
    return (doc if isinstance(doc, dict) else {}), None


def _without_comments(text: str) -> dict[str, Any] | None:
    import re

    # Whole strings first, so that a // inside one (a URL) is kept.
    token = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.DOTALL)
    stripped = token.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text)
    stripped = re.sub(r",(\s*[}\]])", r"\1", stripped)  # trailing commas
    try:
        doc = json.loads(stripped)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _claude(home: Path, project: Path) -> list[str]:
    files = [  # lowest precedence first
        home / ".claude" / "settings.json",
        project / ".claude" / "settings.json",
        project / ".claude" / "settings.local.json",
        CLAUDE_MANAGED,
    ]
    said: list[str] = []
    deciding: tuple[Path, Any] | None = None
    for path in dict.fromkeys(files):
        doc, problem = _settings(path)
        if problem:
            said.append(problem)
        if doc is None:
            continue
        if "disableAllHooks" in doc:
            deciding = (path, doc["disableAllHooks"])
        if path == CLAUDE_MANAGED and doc.get("allowManagedHooksOnly") is True:
            said.append(
                f"{path} sets allowManagedHooksOnly: Claude Code runs only the managed "
                "settings' hooks, not agentcomms'"
            )
    if deciding is not None and deciding[1] is True:
        said.insert(
            0,
            f"{deciding[0]} sets disableAllHooks: Claude Code runs no hook, so agentcomms "
            "sees nothing it does and its never-list refuses nothing",
        )
    return said


def _gemini(home: Path, project: Path) -> list[str]:
    from agentcomms.agents.install import SERVER_NAME, is_our_hook

    files = [  # lowest precedence first
        GEMINI_SYSTEM_DEFAULTS,
        home / ".gemini" / "settings.json",
        project / ".gemini" / "settings.json",
        GEMINI_SYSTEM,
    ]
    said: list[str] = []
    deciding: tuple[Path, Any] | None = None
    for path in dict.fromkeys(files):
        doc, problem = _settings(path)
        if problem:
            said.append(problem)
        config = doc.get("hooksConfig") if doc is not None else None
        if not isinstance(config, dict):
            continue
        if "enabled" in config:
            deciding = (path, config["enabled"])
        disabled = config.get("disabled")
        names = disabled if isinstance(disabled, list) else []
        ours = [n for n in names if n == SERVER_NAME or is_our_hook(n, "gemini")]
        if ours:
            said.append(
                f"{path} lists agentcomms' hooks in hooksConfig.disabled: Gemini CLI does "
                "not run them, so agentcomms sees nothing it does and its never-list refuses "
                "nothing"
            )
    if deciding is not None and deciding[1] is False:
        said.insert(
            0,
            f"{deciding[0]} sets hooksConfig.enabled to false: Gemini CLI runs no hook, so "
            "agentcomms sees nothing it does and its never-list refuses nothing",
        )
    return said
