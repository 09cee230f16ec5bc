"""`agentcomms install`: agentcomms' MCP server and hooks merged into each agent's own files, with
the user's own hooks and servers kept, twice the same as once, and `--uninstall` giving back what
was there. The files are real files in a private HOME; the agents themselves read them in
test_install_claude_code.py."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from agentcomms.agents.install import (
    CLAUDE_EVENTS,
    CODEX_EVENTS,
    GEMINI_EVENTS,
    AgentKind,
    Target,
)
from agentcomms.agents.install_agents import plan
from agentcomms.errors import AgentConfigError
from tests.support.cli import AGENTCOMMS, env_for, run

EXE = ("/opt/venv/bin/agentcomms",)
HOOK = "/opt/venv/bin/agentcomms hook claude-code"

USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh"}]}
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}
USER_STATE: dict[str, Any] = {
    "hasCompletedOnboarding": True,
    "mcpServers": {"github": {"type": "stdio", "command": "npx", "args": ["gh-mcp"]}},
    "projects": {"/src/app": {"hasTrustDialogAccepted": True}},
}


def _write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def _install(
    home: Path, kind: AgentKind = "claude-code", *, uninstall: bool = False, **target: Any
) -> list[Path]:
    """Install (or uninstall) for real; the files it changed."""
    result = plan(
        Target(kind, home=home, project=home / "project", argv=EXE, **target), uninstall=uninstall
    )
    result.apply()
    return [c.path for c in result.changes]


def _ours(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [h for g in groups for h in g["hooks"] if "agentcomms hook" in h["command"]]


def test_claude_code_keeps_the_users_hooks_and_servers_and_adds_each_hook_once(
    tmp_path: Path,
) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    state = tmp_path / ".claude.json"
    _write(settings, json.dumps(USER_SETTINGS, indent=4))
    _write(state, json.dumps(USER_STATE))

    assert _install(tmp_path, agent_id="backend") == [settings, state]

    merged = json.loads(settings.read_text())
    assert merged["model"] == "opus" and merged["permissions"] == USER_SETTINGS["permissions"]
    assert set(merged["hooks"]) == set(CLAUDE_EVENTS)
    # The user's hooks stay first, as they were; ours follow, once per event.
    assert merged["hooks"]["PreToolUse"][0] == USER_SETTINGS["hooks"]["PreToolUse"][0]
    assert merged["hooks"]["Stop"][0] == USER_SETTINGS["hooks"]["Stop"][0]
    for event, run_beside in CLAUDE_EVENTS.items():
        (hook,) = _ours(merged["hooks"][event])
        assert hook["command"] == f"AGENTCOMMS_AGENT_ID=backend {HOOK}"
        assert hook.get("async", False) is run_beside
    assert {e for e, beside in CLAUDE_EVENTS.items() if beside} == {
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
    }
    servers = json.loads(state.read_text())["mcpServers"]
    assert servers["github"] == USER_STATE["mcpServers"]["github"]
    assert servers["agentcomms"] == {
        "type": "stdio",
        "command": EXE[0],
        "args": ["mcp"],
        "env": {"AGENTCOMMS_AGENT_ID": "backend"},
    }
    assert json.loads(state.read_text())["projects"] == USER_STATE["projects"]
    assert settings.stat().st_mode & 0o777 == 0o600


def test_a_second_install_changes_nothing(tmp_path: Path) -> None:
    _write(tmp_path / ".claude" / "settings.json", json.dumps(USER_SETTINGS))
    _install(tmp_path)
    first = {p: p.read_bytes() for p in tmp_path.rglob("*.json")}

    assert _install(tmp_path) == []

    assert {p: p.read_bytes() for p in tmp_path.rglob("*.json")} == first


def test_an_install_from_a_moved_virtualenv_replaces_the_old_hooks(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    _install(tmp_path)

    plan(Target("claude-code", home=tmp_path, argv=("/new/venv/bin/agentcomms",))).apply()

    hooks = json.loads(settings.read_text())["hooks"]
    for event in CLAUDE_EVENTS:
        assert [h["command"] for h in _ours(hooks[event])] == [
            "/new/venv/bin/agentcomms hook claude-code"
        ]


def test_uninstall_gives_back_what_was_there(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    state = tmp_path / ".claude.json"
    _write(settings, json.dumps(USER_SETTINGS))
    _write(state, json.dumps(USER_STATE))
    _install(tmp_path, agent_id="backend")

    assert _install(tmp_path, uninstall=True) == [settings, state]

    assert json.loads(settings.read_text()) == USER_SETTINGS
    assert json.loads(state.read_text()) == USER_STATE
    assert _install(tmp_path, uninstall=True) == []


def test_uninstall_removes_files_that_only_agentcomms_filled(tmp_path: Path) -> None:
    _install(tmp_path, scope="project")
    project = tmp_path / "project"
    assert (project / ".mcp.json").exists() and (project / ".claude" / "settings.json").exists()

    _install(tmp_path, scope="project", uninstall=True)

    assert not (project / ".mcp.json").exists()
    assert not (project / ".claude" / "settings.json").exists()


def test_a_server_of_the_same_name_that_is_not_agentcomms_is_never_replaced(
    tmp_path: Path,
) -> None:
    theirs = {"mcpServers": {"agentcomms": {"command": "/usr/bin/someone-else", "args": []}}}
    state = tmp_path / ".claude.json"
    text = _write(state, json.dumps(theirs))

    with pytest.raises(AgentConfigError, match="not agentcomms"):
        plan(Target("claude-code", home=tmp_path, argv=EXE))

    assert state.read_text() == text
    assert not (tmp_path / ".claude" / "settings.json").exists()


def test_a_broken_file_is_named_with_its_line_and_nothing_changes(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    text = _write(settings, '{\n  "model": "opus",\n  "hooks": {,\n}\n')
    home = tmp_path / "ac"

    done = run(env_for(home, HOME=str(tmp_path)), "install", "claude-code")

    assert done.returncode == 1
    assert f"{settings} line 3, column" in done.stderr
    assert "nothing was changed" in done.stderr
    assert settings.read_text() == text
    assert not (tmp_path / ".claude.json").exists()  # checked before any file is written


def test_dry_run_prints_the_change_and_writes_nothing(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    text = _write(settings, json.dumps(USER_SETTINGS, indent=2) + "\n")

    done = run(env_for(tmp_path / "ac", HOME=str(tmp_path)), "install", "claude-code", "--dry-run")

    assert done.returncode == 0, done.stderr
    assert f"--- {settings}" in done.stdout and "+++ /" in done.stdout
    assert f'"command": "{AGENTCOMMS} hook claude-code"' in done.stdout
    assert "dry run, nothing written" in done.stdout
    assert settings.read_text() == text
    assert not (tmp_path / ".claude.json").exists()


CODEX_CONFIG = """\
# my Codex
model = "o4-mini"
notify = ["notify-send", "codex"]

[mcp_servers.docs]
command = "docs-mcp"  # the team's
"""


def test_codex_config_keeps_comments_and_the_users_notify_and_says_how_to_trust(
    tmp_path: Path,
) -> None:
    config = tmp_path / ".codex" / "config.toml"
    _write(config, CODEX_CONFIG)

    result = plan(Target("codex", home=tmp_path, argv=EXE, agent_id="api"))
    result.apply()

    text = config.read_text()
    assert text.startswith("# my Codex\n") and 'command = "docs-mcp"  # the team\'s' in text
    parsed = tomllib.loads(text)
    assert parsed["notify"] == ["notify-send", "codex"]  # the user's own, left alone
    assert parsed["mcp_servers"]["agentcomms"] == {
        "command": EXE[0],
        "args": ["mcp"],
        "env": {"AGENTCOMMS_AGENT_ID": "api"},
    }
    hooks = json.loads((tmp_path / ".codex" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(CODEX_EVENTS)
    for event in CODEX_EVENTS:
        (hook,) = _ours(hooks[event])
        assert hook == {
            "type": "command",
            "command": f"AGENTCOMMS_AGENT_ID=api {EXE[0]} hook codex",
            # The permission hook waits for the human's answer, past the approval's timeout.
            "timeout": 660 if event == "PermissionRequest" else 10,
        }
    assert any("notify" in n for n in result.notes)
    assert any("Trust all and continue" in n for n in result.notes)

    plan(Target("codex", home=tmp_path, argv=EXE), uninstall=True).apply()

    assert config.read_text() == CODEX_CONFIG
    assert not (tmp_path / ".codex" / "hooks.json").exists()


def test_codex_notify_is_taken_when_free_and_given_back(tmp_path: Path) -> None:
    config = tmp_path / ".codex" / "config.toml"
    _write(config, 'model = "o4-mini"\n')

    _install(tmp_path, "codex")

    assert tomllib.loads(config.read_text())["notify"] == [EXE[0], "hook", "codex"]
    assert _install(tmp_path, "codex") == []
    _install(tmp_path, "codex", uninstall=True)
    assert config.read_text() == 'model = "o4-mini"\n'


def test_a_broken_codex_config_is_named_with_its_line(tmp_path: Path) -> None:
    config = tmp_path / ".codex" / "config.toml"
    text = _write(config, 'model = "o4-mini"\n[mcp_servers\n')

    with pytest.raises(AgentConfigError, match=rf"{config} line 2, column"):
        plan(Target("codex", home=tmp_path, argv=EXE))

    assert config.read_text() == text


def test_gemini_gets_its_server_and_hooks_with_timeouts_in_milliseconds(tmp_path: Path) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    theirs: dict[str, Any] = {
        "theme": "GitHub",
        "hooks": {"AfterAgent": [{"matcher": "*", "hooks": [{"type": "command", "command": "x"}]}]},
    }
    _write(settings, json.dumps(theirs))

    _install(tmp_path, "gemini")

    merged = json.loads(settings.read_text())
    assert merged["theme"] == "GitHub"
    assert merged["mcpServers"]["agentcomms"] == {"command": EXE[0], "args": ["mcp"]}
    assert merged["hooks"]["AfterAgent"][0] == theirs["hooks"]["AfterAgent"][0]
    for event in GEMINI_EVENTS:
        (hook,) = _ours(merged["hooks"][event])
        assert hook["timeout"] == 10_000 and hook["name"] == "agentcomms"
    _install(tmp_path, "gemini", uninstall=True)
    assert json.loads(settings.read_text()) == theirs


def test_the_cli_installs_this_agentcomms_by_its_absolute_path(tmp_path: Path) -> None:
    done = run(env_for(tmp_path / "ac", HOME=str(tmp_path)), "install", "gemini", "--agent", "ui")

    assert done.returncode == 0, done.stderr
    assert "installed agentcomms into Gemini CLI (user scope)" in done.stdout
    merged = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert merged["mcpServers"]["agentcomms"]["command"] == AGENTCOMMS
    assert _ours(merged["hooks"]["BeforeAgent"])[0]["command"] == (
        f"AGENTCOMMS_AGENT_ID=ui {AGENTCOMMS} hook gemini"
    )


def test_a_bad_agent_id_is_refused(tmp_path: Path) -> None:
    done = run(env_for(tmp_path / "ac", HOME=str(tmp_path)), "install", "codex", "--agent", "a b")

    assert done.returncode == 1
    assert "agent id 'a b' is not valid" in done.stderr
    assert not (tmp_path / ".codex").exists()


def test_the_permission_hook_waits_as_long_as_an_approval_does(tmp_path: Path) -> None:
    """Claude Code kills a hook at its `timeout`: the one that waits for the human's answer
    outlives the configured approvals.timeout_s, the others stay short."""
    target = Target("claude-code", home=tmp_path, argv=EXE, approval_timeout_s=900)
    plan(target).apply()
    hooks = json.loads((tmp_path / ".claude" / "settings.json").read_text())["hooks"]
    (permission,) = _ours(hooks["PermissionRequest"])
    (pre,) = _ours(hooks["PreToolUse"])
    assert permission["timeout"] > 900
    assert pre["timeout"] == 10


def test_install_reads_the_configured_approval_timeout(tmp_path: Path) -> None:
    home = tmp_path / "ac"
    home.mkdir(mode=0o700)
    (home / "config.json").write_text(json.dumps({"approvals": {"timeout_s": 1200}}))
    (home / "config.json").chmod(0o600)
    env = env_for(home, HOME=str(tmp_path))
    done = run(env, "install", "claude-code")
    assert done.returncode == 0, done.stderr
    hooks = json.loads((tmp_path / ".claude" / "settings.json").read_text())["hooks"]
    (permission,) = _ours(hooks["PermissionRequest"])
    assert permission["timeout"] > 1200


def test_gemini_remote_approvals_come_from_the_config_and_go_when_turned_off(
    tmp_path: Path,
) -> None:
    """With ``agents.ID.approvals.remote`` the asking tools' BeforeTool waits for the human (as
    long as an approval does, and blocking when it cannot run at all) beside a policy rule that
    skips Gemini's own dialog for them; every other tool's BeforeTool only reports. Off again,
    the policy file goes and the one plain BeforeTool is back."""
    home = tmp_path / "ac"
    home.mkdir(mode=0o700)
    config = home / "config.json"
    remote = {"approvals": {"timeout_s": 900}, "agents": {"ui": {"approvals": {"remote": True}}}}
    config.write_text(json.dumps(remote))
    config.chmod(0o600)
    env = env_for(home, HOME=str(tmp_path))
    settings = tmp_path / ".gemini" / "settings.json"
    policy = tmp_path / ".gemini" / "policies" / "agentcomms-remote-approvals.toml"

    done = run(env, "install", "gemini", "--agent", "ui")

    assert done.returncode == 0, done.stderr
    assert "agentcomms asks you" in done.stdout
    rules = tomllib.loads(policy.read_text())["rule"]
    assert [(r["toolName"], r["decision"]) for r in rules] == [
        (["run_shell_command", "write_file", "replace", "web_fetch"], "allow")
    ]
    groups = json.loads(settings.read_text())["hooks"]["BeforeTool"]
    [(reports, report), (asks, ask)] = [(g["matcher"], g["hooks"][0]) for g in groups]
    # Both refuse the human's commands (every agent's never-list), so both fail closed.
    reporting = f"AGENTCOMMS_AGENT_ID=ui {AGENTCOMMS} hook gemini --never "
    assert f" env {reporting}" in report["command"] and report["command"].endswith("exit 2; }")
    asking = f"AGENTCOMMS_AGENT_ID=ui {AGENTCOMMS} hook gemini --remote-approvals --never "
    assert f" env {asking}" in ask["command"]  # given a time limit, then refused
    assert ask["command"].endswith("exit 2; }")
    assert ask["timeout"] > 900_000 and report["timeout"] == 10_000
    assert asks == "^(run_shell_command|write_file|replace|web_fetch)$"
    assert reports == f"^(?!({asks[2:-2]})$)"
    again = run(env, "install", "gemini", "--agent", "ui").stdout
    assert again == "Gemini CLI (user scope): nothing to change, agentcomms is installed\n"

    config.write_text(json.dumps({"agents": {"ui": {"approvals": {"remote": False}}}}))
    done = run(env, "install", "gemini", "--agent", "ui")

    assert done.returncode == 0, done.stderr
    assert not policy.exists()
    (plain,) = json.loads(settings.read_text())["hooks"]["BeforeTool"]
    assert plain == {"hooks": [report]}


def test_gemini_remote_approvals_need_the_user_scope(tmp_path: Path) -> None:
    """Gemini reads policies only from ~/.gemini/policies: a project's install stays plain,
    says why, and leaves the user's policy file alone."""
    _install(tmp_path, "gemini", remote_approvals=True)  # the user's own install
    policy = tmp_path / ".gemini" / "policies" / "agentcomms-remote-approvals.toml"
    assert policy.exists()

    result = plan(
        Target(
            "gemini",
            scope="project",
            home=tmp_path,
            project=tmp_path / "project",
            argv=EXE,
            remote_approvals=True,
        )
    )
    result.apply()

    assert [c.path for c in result.changes] == [tmp_path / "project" / ".gemini" / "settings.json"]
    assert any("need the user scope" in note for note in result.notes)
    hooks = json.loads(result.changes[0].after or "{}")["hooks"]
    assert [list(g) for g in hooks["BeforeTool"]] == [["hooks"]]  # one plain report
    project = Target("gemini", scope="project", home=tmp_path, project=tmp_path / "project")
    plan(project, uninstall=True).apply()
    assert policy.exists()


def test_an_agent_the_config_does_not_name_is_installed_with_a_note_saying_so(
    tmp_path: Path,
) -> None:
    """Run as the agent's own Unix user, install reads that user's config: one that names no
    such agent installs none of its own settings, and says so, naming the file."""
    home = tmp_path / "ac"
    env = env_for(home, HOME=str(tmp_path))

    done = run(env, "install", "gemini", "--agent", "ui")

    assert done.returncode == 0, done.stderr
    assert f"note: {home / 'config.json'} has no agents.ui" in done.stdout
    assert not (tmp_path / ".gemini" / "policies").exists()  # no remote approvals
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "config.json").write_text(json.dumps({"agents": {"ui": {"approvals": {}}}}))
    (home / "config.json").chmod(0o600)
    again = run(env, "install", "gemini", "--agent", "ui")
    assert again.returncode == 0, again.stderr
    assert "has no agents.ui" not in again.stdout
