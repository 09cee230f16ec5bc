"""Claude Code's permission mode and agentcomms: the mode a new session starts in, read from the
user's, the project's and the local settings files (the later overriding), as `doctor` reports
it; and `install claude-code --permission-mode` writing it beside the user's other settings.
Real files in a private HOME; the real Claude Code reads them in
test_permission_mode_claude.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentcomms.agents.install import Target
from agentcomms.agents.install_agents import plan
from agentcomms.agents.permission_mode import effective_mode, write_mode
from agentcomms.cli.checks import Check
from agentcomms.cli.doctor_agents import check_permission_modes
from agentcomms.config import host_name
from agentcomms.errors import AgentConfigError
from agentcomms.models import Agent
from tests.support.cli import env_for, run
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

USER = ".claude/settings.json"
PROJECT = "p/.claude/settings.json"
LOCAL = "p/.claude/settings.local.json"


def _write(root: Path, files: dict[str, Any]) -> None:
    for name, doc in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))


def _mode(mode: str) -> dict[str, Any]:
    return {"permissions": {"defaultMode": mode}}


@pytest.mark.parametrize(
    ("files", "mode", "source", "asks"),
    [
        ({}, "auto", None, False),  # Claude Code's own default
        ({USER: {"model": "opus"}}, "auto", None, False),
        ({USER: _mode("default")}, "default", USER, True),
        ({USER: _mode("manual")}, "manual", USER, True),  # Claude Code's alias
        ({USER: _mode("default"), PROJECT: _mode("acceptEdits")}, "acceptEdits", PROJECT, True),
        (
            {USER: _mode("default"), PROJECT: _mode("plan"), LOCAL: _mode("auto")},
            "auto",
            LOCAL,
            False,
        ),
        ({USER: _mode("auto"), LOCAL: _mode("default")}, "default", LOCAL, True),
        ({USER: _mode("default"), PROJECT: {"permissions": {}}}, "default", USER, True),
        ({USER: _mode("bypassPermissions")}, "bypassPermissions", USER, False),
        ({USER: _mode("dontAsk")}, "dontAsk", USER, False),
        ({USER: _mode("yolo")}, "yolo", USER, False),  # no mode Claude Code knows
    ],
)
def test_the_later_settings_file_decides_the_mode(
    tmp_path: Path, files: dict[str, Any], mode: str, source: str | None, asks: bool
) -> None:
    _write(tmp_path, files)

    found = effective_mode(tmp_path, tmp_path / "p")

    assert (found.mode, found.source, found.asks_agentcomms) == (
        mode,
        tmp_path / source if source else None,
        asks,
    )


@pytest.mark.parametrize(
    ("files", "said"),
    [
        ({}, "starts in auto mode (no permissions.defaultMode set: Claude Code's own default): "
         "its approvals stay in the terminal"),
        ({USER: _mode("default")}, "starts in default mode (set in {home}/.claude/settings.json): "
         "its approvals reach agentcomms"),
        ({LOCAL: _mode("bypassPermissions")}, "starts in bypassPermissions mode (set in "
         "{home}/p/.claude/settings.local.json): it asks for no approval"),
        ({USER: _mode("yolo")}, "has permissions.defaultMode 'yolo' (set in "
         "{home}/.claude/settings.json), which is no mode it knows (default, acceptEdits, plan, "
         "auto, dontAsk, bypassPermissions)"),
    ],
)  # fmt: skip
def test_the_mode_is_said_with_where_its_approvals_go(
    tmp_path: Path, files: dict[str, Any], said: str
) -> None:
    _write(tmp_path, files)

    found = effective_mode(tmp_path, tmp_path / "p")

    assert found.describe() == f"Claude Code in {tmp_path / 'p'} " + said.format(home=tmp_path)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "line 1, column 2: Expecting property name enclosed in double quotes"),
        ('{"permissions": ["ask"]}', '"permissions" is not an object'),
        ('{"permissions": {"defaultMode": 1}}', '"permissions.defaultMode" is 1, not a mode'),
    ],
)
def test_a_broken_settings_file_is_named(tmp_path: Path, text: str, problem: str) -> None:
    _write(tmp_path, {PROJECT: text})

    with pytest.raises(AgentConfigError) as raised:
        effective_mode(tmp_path, tmp_path / "p")

    assert str(raised.value).startswith(f"{tmp_path / PROJECT}")
    assert problem in str(raised.value)


def test_install_writes_the_mode_beside_the_users_settings_and_hooks_in_one_write(
    tmp_path: Path,
) -> None:
    user = {"model": "opus", "permissions": {"allow": ["Bash(ls:*)"], "defaultMode": "auto"}}
    _write(tmp_path, {USER: user, ".claude.json": {"hasCompletedOnboarding": True}})
    env = env_for(tmp_path / "ac", HOME=str(tmp_path), PATH="/usr/bin:/bin")

    done = run(env, "install", "claude-code", "--permission-mode", "default")

    assert done.returncode == 0, done.stderr
    settings = json.loads((tmp_path / USER).read_text())
    assert settings["model"] == "opus"
    assert settings["permissions"] == {"allow": ["Bash(ls:*)"], "defaultMode": "default"}
    assert "PermissionRequest" in settings["hooks"]
    # Claude Code's one-time offer to make auto the default would undo it with one Enter.
    state = json.loads((tmp_path / ".claude.json").read_text())
    assert state["hasSeenAutoDefaultNudge"] is True and state["hasCompletedOnboarding"] is True
    assert "mcpServers" in state
    assert (
        "\n  auto               a classifier decides; what it will not approve asks" in done.stdout
    )
    assert "starts in default mode" in done.stdout and "approvals reach agentcomms" in done.stdout
    # A second run has nothing to change.
    again = run(env, "install", "claude-code", "--permission-mode", "default")
    assert "nothing to change" in again.stdout


def test_install_without_a_mode_says_approvals_stay_in_the_terminal(tmp_path: Path) -> None:
    env = env_for(tmp_path / "ac", HOME=str(tmp_path), PATH="/usr/bin:/bin")

    done = run(env, "install", "claude-code")

    assert done.returncode == 0, done.stderr
    assert "starts in auto mode" in done.stdout
    assert "--permission-mode default` makes tools ask through agentcomms" in done.stdout
    assert "defaultMode" not in (tmp_path / USER).read_text()


def test_a_projects_mode_is_written_in_the_projects_file(tmp_path: Path) -> None:
    result = plan(Target("claude-code", scope="project", home=tmp_path, project=tmp_path / "p"))
    write_mode(result, "acceptEdits")
    result.apply()

    assert json.loads((tmp_path / PROJECT).read_text())["permissions"] == {
        "defaultMode": "acceptEdits"
    }
    assert not (tmp_path / ".claude.json").exists()  # the user's state is not the project's


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["codex", "--permission-mode", "default"], "--permission-mode is Claude Code's setting"),
        (["claude-code", "--permission-mode", "ask"], "'ask' is not one of Claude Code's modes"),
        (["claude-code", "--uninstall", "--permission-mode", "default"], "use one"),
    ],
)
def test_a_mode_that_cannot_be_written_is_refused(
    tmp_path: Path, args: list[str], error: str
) -> None:
    env = env_for(tmp_path / "ac", HOME=str(tmp_path), PATH="/usr/bin:/bin")

    done = run(env, "install", *args)

    assert done.returncode == 1 and error in done.stderr
    assert not (tmp_path / ".claude").exists()


async def test_doctor_names_the_mode_that_keeps_approvals_in_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "p").mkdir()
    monkeypatch.chdir(tmp_path / "p")
    checks: list[Check] = []
    await check_permission_modes([], checks)
    assert checks == []  # Claude Code has no agentcomms hooks here: not its business

    plan(Target("claude-code", home=tmp_path, project=tmp_path / "p")).apply()
    await check_permission_modes([], checks)
    (auto,) = checks
    assert (auto.ok, auto.warn) == (True, True)
    assert "starts in auto mode" in auto.detail and "stay in the terminal" in auto.detail
    assert auto.fix is not None and "--permission-mode default" in auto.fix

    _write(tmp_path, {LOCAL: _mode("default")})
    checks.clear()
    await check_permission_modes([], checks)
    (manual,) = checks
    assert (manual.ok, manual.warn, manual.fix) == (True, False, None)

    _write(tmp_path, {LOCAL: _mode("dontAsk")})
    checks.clear()
    await check_permission_modes([], checks)
    (refusing,) = checks
    assert refusing.warn and refusing.fix == (
        f'set permissions.defaultMode to "default" in {tmp_path / LOCAL}'
    )


async def test_doctor_reads_the_mode_in_the_directory_of_each_registered_claude(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmux: Tmux
) -> None:
    """A registered pane whose program is Claude Code is looked at in its own directory, where
    a project's settings may differ from those of the directory doctor runs in."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    project = tmp_path / "p"
    _write(tmp_path, {LOCAL: _mode("bypassPermissions")})
    claude = tmp_path / "bin" / "claude"  # a process named as Claude Code's is
    claude.parent.mkdir()
    claude.write_text("#!/bin/sh\nsleep 600\n")
    claude.chmod(0o755)
    tmux.run("new-session", "-d", "-s", "c", "-c", str(project), str(claude))
    tmux.run("new-session", "-d", "-s", "sh", "-c", str(project), "sh")
    agents = [
        Agent(id="backend", target="c:0.0", tmux_socket=tmux.socket, host=host_name()),
        Agent(id="shell", target="sh:0.0", tmux_socket=tmux.socket, host=host_name()),
        Agent(id="far", target="c:0.0", tmux_socket=tmux.socket, host="elsewhere"),
    ]

    async def found() -> list[Check] | None:
        checks: list[Check] = []
        await check_permission_modes(agents, checks)
        return checks or None

    (backend,) = await eventually(found)  # this directory has no agentcomms hooks; sh no Claude
    assert backend.name == "permission mode agent backend" and backend.warn
    assert backend.detail == (
        f"agent backend: Claude Code in {project} starts in bypassPermissions mode (set in "
        f"{project}/.claude/settings.local.json): it asks for no approval"
    )
