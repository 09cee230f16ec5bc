"""`doctor` on agentcomms in the agents' own configuration: each hook there once, the agentcomms
the hooks run still there, the MCP server, and the agent's version (the real Claude Code's, and
one too old for the hooks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentcomms.agents.install import Target
from agentcomms.agents.install_agents import plan
from agentcomms.agents.installed import Finding, inspect_all
from tests.support.agents import CLAUDE_CODE_VERSION, agent_binary
from tests.support.cli import env_for, run
from tests.support.home import write_config


def _exe(tmp_path: Path) -> str:
    """An agentcomms that exists, for the hooks to run."""
    exe = tmp_path / "venv" / "bin" / "agentcomms"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    return str(exe)


def _findings(tmp_path: Path, **target: object) -> list[Finding]:
    return inspect_all(Target("claude-code", home=tmp_path, project=tmp_path / "p", **target))  # type: ignore[arg-type]


@pytest.mark.usefixtures("agent_clis")
async def test_an_install_is_found_whole_with_the_real_claudes_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude = await agent_binary("claude")
    monkeypatch.setenv("PATH", f"{claude.parent}:/usr/bin:/bin")
    plan(Target("claude-code", home=tmp_path, argv=(_exe(tmp_path),))).apply()

    findings = _findings(tmp_path)

    assert [(f.name, f.ok) for f in findings] == [
        ("claude-code (user) hooks", True),
        ("claude-code (user) version", True),
    ]
    assert findings[0].detail.startswith("11 hooks, each once, and the MCP server in ")
    assert findings[1].detail == f"Claude Code {CLAUDE_CODE_VERSION}"


def test_a_hook_missing_or_doubled_and_a_gone_agentcomms_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    exe = _exe(tmp_path)
    plan(Target("claude-code", home=tmp_path, argv=(exe,))).apply()
    settings = tmp_path / ".claude" / "settings.json"
    doc = json.loads(settings.read_text())
    del doc["hooks"]["Notification"]
    doc["hooks"]["Stop"].append(doc["hooks"]["Stop"][0])  # copied by hand
    settings.write_text(json.dumps(doc))
    Path(exe).unlink()  # the virtualenv was removed

    problems = [f for f in _findings(tmp_path) if not f.ok]

    assert [f.detail.partition(" in ")[0] for f in problems] == [
        "hooks missing for Notification; hooks present more than once for Stop",
        f"the hooks run {exe}, which is gone",
    ]
    assert {f.fix for f in problems} == {"`agentcomms install claude-code`"}


def test_an_agent_older_than_the_hooks_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = tmp_path / "old-bin" / "codex"
    old.parent.mkdir()
    old.write_text("#!/bin/sh\necho 'codex-cli 0.98.0'\n")
    old.chmod(0o755)
    monkeypatch.setenv("PATH", f"{old.parent}:/usr/bin:/bin")
    plan(Target("codex", home=tmp_path, argv=(_exe(tmp_path),))).apply()

    findings = _findings(tmp_path)

    assert [(f.name, f.ok) for f in findings] == [
        ("codex (user) hooks", True),
        ("codex (user) trust", False),  # Codex itself writes the user's trust (test_agent_codex)
        ("codex (user) version", False),
    ]
    assert findings[1].detail.startswith("Codex will not run the hooks for SessionStart, ")
    assert "Trust all and continue" in str(findings[1].fix)
    assert findings[2].detail == (
        "Codex 0.98.0 is older than 0.171.0, which the hooks were written for"
    )


def test_doctor_reports_the_agents_checks(tmp_path: Path) -> None:
    env = env_for(tmp_path / "ac", HOME=str(tmp_path), PATH="/usr/bin:/bin")
    assert run(env, "install", "gemini", "--scope", "user").returncode == 0

    done = run(env, "doctor", "--json", timeout=60)

    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    gemini = checks["agent gemini (user) hooks"]
    assert gemini["ok"], gemini
    assert gemini["detail"].startswith("gemini (user): 8 hooks, each once, and the MCP server in ")


def test_geminis_remote_approvals_hook_is_not_a_second_before_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    target = Target("gemini", home=tmp_path, argv=(_exe(tmp_path),), remote_approvals=True)
    plan(target).apply()

    findings = inspect_all(Target("gemini", home=tmp_path, project=tmp_path / "p"))

    assert (findings[0].name, findings[0].ok) == ("gemini (user) hooks", True)
    assert findings[0].detail.startswith("8 hooks, each once, and the MCP server in ")


def test_never_list_hooks_an_older_agentcomms_wrote_are_named_until_installed_again(
    tmp_path: Path,
) -> None:
    """An older agentcomms wrote Claude Code's never-list handlers (and Gemini CLI's BeforeTool
    hook) without failing closed: a crashed agentcomms let a never-listed call run; a later one
    refused it then, but not when agentcomms hung until the agent killed the hook. doctor names
    them until `install` writes them again."""
    rule = "Bash(rm -rf *)"
    env = env_for(tmp_path / "ac", HOME=str(tmp_path), PATH="/usr/bin:/bin")
    write_config(tmp_path / "ac", {"approvals": {"never": [rule]}})
    assert run(env, "install", "claude-code").returncode == 0
    settings = tmp_path / ".claude" / "settings.json"
    doc = json.loads(settings.read_text())
    handlers = [h for g in doc["hooks"]["PreToolUse"] for h in g["hooks"]]
    (handler,) = [h for h in handlers if rule in h["command"]]  # the shell's, beside the human's
    words = handler["command"].split()
    exe = words[words.index("hook") - 1]
    # As it was written: the same rules, and nothing when agentcomms fails.
    handler["command"] = handler["command"].split(" env ", 1)[1].split(" || ", 1)[0]
    settings.write_text(json.dumps(doc))

    done = run(env, "doctor", "--json", timeout=60)

    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    stale = checks["agent claude-code (user) fail-closed"]
    assert not stale["ok"]
    assert stale["detail"] == (
        "claude-code (user): 1 of the hooks that refuse the never-list let the call run when "
        "agentcomms fails (crashed, or moved away) or hangs: an older agentcomms wrote them"
    )
    assert stale["fix"] == "`agentcomms install claude-code` again"
    assert "agent claude-code (user) never-list" not in checks  # the rules are as configured

    assert run(env, "install", "claude-code").returncode == 0
    names = [f.name for f in _findings(tmp_path)]
    assert "claude-code (user) hooks" in names
    assert "claude-code (user) fail-closed" not in names

    plan(Target("gemini", home=tmp_path, argv=(exe,))).apply()  # no never-list: nothing to fail
    assert "gemini (user) fail-closed" not in [f.name for f in _findings(tmp_path)]
    gemini = tmp_path / ".gemini" / "settings.json"
    doc = json.loads(gemini.read_text())
    (group,) = doc["hooks"]["BeforeTool"]
    refused = "echo 'agentcomms could not check this call against its never-list' >&2; exit 2;"
    # as the wrapper without a time limit wrote it
    group["hooks"][0]["command"] = f"{exe} hook gemini --never 'Bash(rm -rf *)' || {{ {refused} }}"
    gemini.write_text(json.dumps(doc))
    found = {f.name: f for f in _findings(tmp_path)}
    assert found["gemini (user) fail-closed"].fix == "`agentcomms install gemini` again"


def test_an_agent_missing_from_path_is_a_warning_with_its_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    plan(Target("claude-code", home=tmp_path, argv=(_exe(tmp_path),))).apply()

    version = next(f for f in _findings(tmp_path) if f.name == "claude-code (user) version")

    assert (version.ok, version.warn) == (True, True)  # not broken, not ✓ either
    assert version.detail.startswith("`claude` is not on PATH: Claude Code cannot be started")
    assert version.fix == (
        "install Claude Code (`npm install -g @anthropic-ai/claude-code@latest`) or add its "
        "folder to PATH"
    )
