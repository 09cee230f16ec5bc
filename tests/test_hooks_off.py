"""`doctor` says when an agent's effective settings switch its hooks off, naming the file: the
never-list's only gate, and how agentcomms sees the agent at all. Real settings files in a
temporary home and project, as each agent merges them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agentcomms.agents.hooks_off import hooks_switched_off
from agentcomms.agents.install import Target
from agentcomms.agents.install_agents import plan
from agentcomms.agents.installed import inspect_all
from tests.support.cli import AGENTCOMMS, env_for, run
from tests.support.home import write_config

CLAUDE_USER = ".claude/settings.json"
CLAUDE_PROJECT = "p/.claude/settings.json"
CLAUDE_LOCAL = "p/.claude/settings.local.json"
GEMINI_USER = ".gemini/settings.json"
GEMINI_PROJECT = "p/.gemini/settings.json"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize(
    ("kind", "files", "off_by"),
    [
        ("claude-code", {CLAUDE_USER: '{"disableAllHooks": true}'}, CLAUDE_USER),
        ("claude-code", {CLAUDE_PROJECT: '{"disableAllHooks": true}'}, CLAUDE_PROJECT),
        ("claude-code", {CLAUDE_LOCAL: '{"disableAllHooks": true}'}, CLAUDE_LOCAL),
        # The project's file outranks the user's, either way.
        (
            "claude-code",
            {CLAUDE_USER: '{"disableAllHooks": false}', CLAUDE_LOCAL: '{"disableAllHooks": true}'},
            CLAUDE_LOCAL,
        ),
        (
            "claude-code",
            {
                CLAUDE_USER: '{"disableAllHooks": true}',
                CLAUDE_PROJECT: '{"disableAllHooks": false}',
            },
            None,
        ),
        ("claude-code", {CLAUDE_USER: '{"hooks": {}}'}, None),
        ("claude-code", {}, None),
        ("gemini", {GEMINI_USER: '{"hooksConfig": {"enabled": false}}'}, GEMINI_USER),
        ("gemini", {GEMINI_PROJECT: '{"hooksConfig": {"enabled": false}}'}, GEMINI_PROJECT),
        (
            "gemini",
            {
                GEMINI_USER: '{"hooksConfig": {"enabled": true}}',
                GEMINI_PROJECT: '// the repository\'s own\n{"hooksConfig": {"enabled": false,},}',
            },
            GEMINI_PROJECT,
        ),
        (
            "gemini",
            {
                GEMINI_USER: '{"hooksConfig": {"enabled": false}}',
                GEMINI_PROJECT: '{"hooksConfig": {"enabled": true}}',
            },
            None,
        ),
        # Gemini CLI switches off one hook by its name or command.
        (
            "gemini",
            {GEMINI_PROJECT: '{"hooksConfig": {"disabled": ["agentcomms"]}}'},
            GEMINI_PROJECT,
        ),
        (
            "gemini",
            {GEMINI_USER: '{"hooksConfig": {"disabled": ["/opt/v/bin/agentcomms hook gemini"]}}'},
            GEMINI_USER,
        ),
        ("gemini", {GEMINI_USER: '{"hooksConfig": {"disabled": ["lint-hook"]}}'}, None),
        ("codex", {GEMINI_USER: '{"hooksConfig": {"enabled": false}}'}, None),
    ],
)
def test_the_file_that_switches_an_agents_hooks_off_is_named(
    tmp_path: Path, kind: str, files: dict[str, str], off_by: str | None
) -> None:
    _write(tmp_path, files)
    said = hooks_switched_off(kind, tmp_path, tmp_path / "p")
    if off_by is None:
        assert said == []
    else:
        (cause,) = said
        assert cause.startswith(f"{tmp_path / off_by} "), cause
        assert "never-list refuses nothing" in cause


def test_a_settings_file_that_cannot_be_read_is_said(tmp_path: Path) -> None:
    _write(tmp_path, {GEMINI_PROJECT: '{"hooksConfig": {'})
    (cause,) = hooks_switched_off("gemini", tmp_path, tmp_path / "p")
    assert str(tmp_path / GEMINI_PROJECT) in cause and "unknown" in cause


def test_doctor_names_the_file_where_agentcomms_is_installed(tmp_path: Path) -> None:
    home = tmp_path / "ac"
    write_config(home, {})
    env = env_for(home, HOME=str(tmp_path))
    assert run(env, "install", "gemini").returncode == 0
    project = tmp_path / "repo"
    _write(project, {".gemini/settings.json": '{"hooksConfig": {"enabled": false}}'})
    _write(tmp_path, {CLAUDE_USER: '{"disableAllHooks": true}'})  # Claude: not installed

    doctor = [AGENTCOMMS, "doctor", "--json"]  # in the project: its settings count
    done = subprocess.run(doctor, env=env, cwd=project, capture_output=True, text=True, timeout=60)

    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    off = checks["agent gemini (effective) hooks-enabled"]
    assert not off["ok"]
    assert str(project / ".gemini" / "settings.json") in off["detail"]
    assert "take that setting out" in off["fix"]
    assert not [n for n in checks if n.startswith("agent claude-code")]
    # Switched on again: nothing to say.
    _write(project, {".gemini/settings.json": '{"hooksConfig": {"enabled": true}}'})
    target = Target("claude-code", home=tmp_path, project=project)
    assert not [f for f in inspect_all(target) if f.name.endswith("hooks-enabled")]
    plan(Target("claude-code", home=tmp_path, argv=("/opt/v/bin/agentcomms",))).apply()
    found = [f for f in inspect_all(target) if f.name.endswith("hooks-enabled")]
    assert [f.name for f in found] == ["claude-code (effective) hooks-enabled"]
