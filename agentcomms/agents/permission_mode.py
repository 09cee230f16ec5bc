"""Claude Code's permission mode, and what it means for agentcomms.

Claude Code asks the human through its ``PermissionRequest`` hook (agentcomms' approvals) only in
the modes where a tool call waits for a person. Since 2.1.328 it starts in *auto* mode when no
``permissions.defaultMode`` is set: a classifier decides, and what it will not approve shows
Claude's own dialog in the terminal with no hook run at all (measured), so approvals never reach
the human's phone or chat.

The mode a new session starts in comes from the settings files, the later overriding the
earlier: the user's ``~/.claude/settings.json``, the project's ``.claude/settings.json``, then
its ``.claude/settings.local.json``. (A ``--permission-mode`` flag or Shift+Tab changes one
session only.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentcomms.agents.install import (
    Plan,
    dump_json,
    edit_json,
    is_our_hook,
    load_json,
    read_text,
)
from agentcomms.errors import AgentConfigError


@dataclass(frozen=True)
class Mode:
    name: str
    # Whether a tool call that waits for a person asks through agentcomms' hook.
    asks_agentcomms: bool
    meaning: str


MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode("default", True, "every tool that asks goes through agentcomms' hook (manual mode)"),
        Mode("acceptEdits", True, "edits run unasked; the rest (Bash…) asks through the hook"),
        Mode("plan", True, "nothing runs; leaving the plan asks through the hook"),
        Mode(
            "auto",
            False,
            "a classifier decides; what it will not approve asks in the terminal only, no hook",
        ),
        Mode("dontAsk", False, "nothing asks; what is not allowed in advance is refused"),
        Mode("bypassPermissions", False, "nothing asks; everything runs"),
    )
}
# What Claude Code starts in when no settings file names a mode (2.1.328 and later).
UNSET_MODE = "auto"
# Claude Code's own alias for the default mode, on its command line.
ALIASES = {"manual": "default"}
SCOPES = ("user", "project", "local")


def settings_files(home: Path, project: Path) -> list[tuple[str, Path]]:
    """Claude Code's settings files that may set the mode, the later overriding the earlier."""
    return [
        ("user", home / ".claude" / "settings.json"),
        ("project", project / ".claude" / "settings.json"),
        ("local", project / ".claude" / "settings.local.json"),
    ]


@dataclass(frozen=True)
class Effective:
    """The mode a new Claude Code session in `project` starts in, and the file that set it."""

    project: Path
    mode: str  # as written (an unknown one too)
    source: Path | None  # None: no file sets it, Claude Code's own default

    @property
    def known(self) -> Mode | None:
        return MODES.get(ALIASES.get(self.mode, self.mode))

    @property
    def asks_agentcomms(self) -> bool:
        known = self.known
        return known is not None and known.asks_agentcomms

    def describe(self) -> str:
        where = (
            f"set in {self.source}"
            if self.source
            else "no permissions.defaultMode set: Claude Code's own default"
        )
        known = self.known
        if known is None:
            return (
                f"Claude Code in {self.project} has permissions.defaultMode {self.mode!r} "
                f"({where}), which is no mode it knows ({', '.join(MODES)})"
            )
        said = (
            "its approvals reach agentcomms"
            if known.asks_agentcomms
            else "its approvals stay in the terminal"
            if known.name == "auto"
            else "it asks for no approval"
        )
        return f"Claude Code in {self.project} starts in {known.name} mode ({where}): {said}"


def _mode_in(path: Path) -> str | None:
    doc = load_json(path, read_text(path))
    permissions = doc.get("permissions")
    if permissions is None:
        return None
    if not isinstance(permissions, dict):
        raise AgentConfigError(f'{path}: "permissions" is not an object, as Claude Code expects')
    mode = permissions.get("defaultMode")
    if mode is not None and not isinstance(mode, str):
        raise AgentConfigError(
            f'{path}: "permissions.defaultMode" is {json.dumps(mode)}, not a mode name '
            f"({', '.join(MODES)})"
        )
    return mode


def effective_mode(home: Path, project: Path) -> Effective:
    """The mode Claude Code starts in for `project`; AgentConfigError names a broken file."""
    found = Effective(project, UNSET_MODE, None)
    for _, path in settings_files(home, project):
        mode = _mode_in(path)
        if mode is not None:
            found = Effective(project, mode, path)
    return found


def mode_table() -> str:
    """What each mode means for agentcomms, one line each."""
    width = max(len(name) for name in MODES)
    lines = [f"  {m.name:<{width}}  {m.meaning}" for m in MODES.values()]
    return "Claude Code's permission mode decides whether its approvals reach agentcomms:\n" + (
        "\n".join(lines)
    )


def check_mode(mode: str) -> str:
    """The mode's name as Claude Code writes it; AgentConfigError for one it does not know."""
    name = ALIASES.get(mode, mode)
    if name not in MODES:
        raise AgentConfigError(
            f"--permission-mode {mode!r} is not one of Claude Code's modes: "
            f"{', '.join(MODES)} (default is manual mode, where tools ask through agentcomms)"
        )
    return name


def write_mode(plan: Plan, mode: str) -> None:
    """Add to `plan`: ``permissions.defaultMode`` = `mode` in the settings file of its scope,
    the file's other settings kept. In the user's file a mode other than auto would bring
    Claude Code's one-time offer "Make auto mode your default permission mode?" (Yes selected),
    which undoes the choice with one Enter: the offer is marked as seen in ``~/.claude.json``."""
    target = plan.target
    base = target.home if target.scope == "user" else target.project
    settings = base / ".claude" / "settings.json"

    def set_mode(doc: dict[str, Any]) -> None:
        permissions = doc.setdefault("permissions", {})
        if not isinstance(permissions, dict):
            raise AgentConfigError(
                f'{settings}: "permissions" is not an object, as Claude Code expects; fix it '
                "and run again; nothing was changed"
            )
        permissions["defaultMode"] = mode

    _edit_planned(plan, settings, set_mode)
    if target.scope == "user" and mode != "auto":

        def seen(doc: dict[str, Any]) -> None:
            doc["hasSeenAutoDefaultNudge"] = True

        _edit_planned(plan, target.home / ".claude.json", seen)


def _edit_planned(plan: Plan, path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """`edit` the JSON of `path` as the plan already leaves it (the hooks' install may have
    changed the same file), so one write carries both."""
    for i, change in enumerate(plan.changes):
        if change.path == path:
            doc = load_json(path, change.after)
            edit(doc)
            plan.changes[i] = replace(change, after=dump_json(doc))
            return
    edit_json(plan, path, edit)


def mode_notes(home: Path, project: Path) -> list[str]:
    """What `install claude-code` tells: each mode's meaning, and the one Claude Code starts in
    here (with the command that makes approvals reach agentcomms, when they do not)."""
    found = effective_mode(home, project)
    notes = [mode_table(), found.describe()]
    if found.asks_agentcomms:
        return notes
    if found.source is None or found.source == home / ".claude" / "settings.json":
        notes.append(FIX)
    else:  # a project's own setting wins over the user's
        notes.append(
            f"{found.source} decides for this project: set its permissions.defaultMode to "
            '"default" for tools to ask through agentcomms'
        )
    return notes


FIX = (
    "`agentcomms install claude-code --permission-mode default` makes tools ask through "
    "agentcomms (or press Shift+Tab in each Claude Code session until it shows manual mode)"
)


def has_our_hooks(home: Path, project: Path) -> bool:
    """Whether agentcomms' hooks are in Claude Code's user or project settings."""
    for scope, path in settings_files(home, project):
        if scope == "local":
            continue
        hooks = load_json(path, read_text(path)).get("hooks")
        for groups in hooks.values() if isinstance(hooks, dict) else ():
            for group in groups if isinstance(groups, list) else ():
                handlers = group.get("hooks") if isinstance(group, dict) else None
                for handler in handlers if isinstance(handlers, list) else ():
                    if isinstance(handler, dict) and is_our_hook(
                        handler.get("command"), "claude-code"
                    ):
                        return True
    return False
