"""`agentcomms install claude-code` read by the real Claude Code: the hooks it writes run, for
every event the state needs, in the agent's pane, and Claude itself lists the MCP server.

The hooks' agentcomms is a recorder named ``agentcomms`` (it writes its arguments, environment
and stdin to a file per run), so the test sees exactly what Claude Code gives each hook."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentcomms.agents.install import Target
from agentcomms.agents.install_agents import plan
from tests.fakes.anthropic import FakeAnthropic, bash, text
from tests.support.agents import (
    PROCEED_DIALOG,
    agent_binary,
    claude_env,
    prepare_claude_home,
    start_claude,
)
from tests.support.cli import AGENTCOMMS, env_for, run
from tests.support.hooks import recorded_runs, recording_agentcomms
from tests.support.tmux import Tmux
from tests.support.waiting import eventually


async def test_the_installed_hooks_run_in_the_agents_pane_for_every_event(
    tmux: Tmux, tmp_path: Path, anthropic: FakeAnthropic
) -> None:
    exe, runs = recording_agentcomms(tmp_path)

    def install(home: Path, project: Path) -> None:
        target = Target(
            "claude-code", agent_id="backend", home=home, project=project, argv=(str(exe),)
        )
        plan(target).apply()

    anthropic.on("touch the hooked file", bash("touch hooked.txt"), text("Hooked and done."))
    claude = await start_claude(tmux, tmp_path / "claude", anthropic, setup=install)
    pane_id = tmux.run("display-message", "-p", "-t", claude.target, "#{pane_id}").stdout.strip()

    await claude.type("touch the hooked file")
    await claude.wait_for_screen(PROCEED_DIALOG)
    await claude.answer(PROCEED_DIALOG, "Enter")
    await claude.wait_for_screen("Hooked and done.")

    wanted = {"SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest"}
    wanted |= {"PostToolUse", "Stop"}

    def all_ran() -> list[dict[str, Any]] | None:
        hooks = [r for r in recorded_runs(runs) if r["args"] != "mcp"]
        return hooks if wanted <= {e["hook_event_name"] for e in hooks} else None

    seen = await eventually(all_ran)
    # Claude started the MCP server too, as the agent the install named.
    servers = await eventually(lambda: [r for r in recorded_runs(runs) if r["args"] == "mcp"])
    assert all(r["agent_id"] == "backend" and r["jsonrpc"] == "2.0" for r in servers)
    for event in seen:
        assert event["args"] == "hook claude-code"
        assert event["agent_id"] == "backend"
        assert event["pane"] == pane_id  # the hook can find its agent by its pane
    by_name = {e["hook_event_name"]: e for e in seen}
    assert by_name["UserPromptSubmit"]["prompt"] == "touch the hooked file"
    assert by_name["PermissionRequest"]["tool_name"] == "Bash"
    assert by_name["PermissionRequest"]["tool_input"]["command"] == "touch hooked.txt"
    assert by_name["Stop"]["last_assistant_message"] == "Hooked and done."


@pytest.mark.usefixtures("agent_clis")
async def test_claude_lists_the_installed_mcp_server(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    prepare_claude_home(home, project)
    done = run(env_for(tmp_path / "ac", HOME=str(home)), "install", "claude-code")
    assert done.returncode == 0, done.stderr

    claude = await agent_binary("claude")
    listed = await asyncio.to_thread(
        subprocess.run,
        [str(claude), "mcp", "get", "agentcomms"],
        env=claude_env(home, FakeAnthropic()),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=90,
    )

    assert "Scope: User config" in listed.stdout, listed.stdout + listed.stderr
    assert f"Command: {AGENTCOMMS}" in listed.stdout
    assert "Args: mcp" in listed.stdout
