"""`agentcomms install gemini` read back by Gemini CLI itself: the server listed, and the whole
settings file (hooks included) accepted by its schema check, which names any key it refuses."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from agentcomms.agents.install import Target
from agentcomms.agents.install_agents import plan
from tests.support.agents import agent_binary

# Every test here starts a real agent.
pytestmark = pytest.mark.usefixtures("agent_clis")


async def _mcp_list(home: Path) -> str:
    gemini = await agent_binary("gemini")
    done = await asyncio.to_thread(
        subprocess.run,
        [str(gemini), "mcp", "list"],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


async def test_gemini_reads_the_installed_server_and_accepts_the_hooks(tmp_path: Path) -> None:
    plan(Target("gemini", agent_id="docs", home=tmp_path, argv=("/opt/ac/bin/agentcomms",))).apply()

    listed = await _mcp_list(tmp_path)

    assert "agentcomms: /opt/ac/bin/agentcomms mcp (stdio)" in listed, listed
    assert "Please fix the configuration" not in listed


async def test_gemini_names_a_hook_key_it_refuses(tmp_path: Path) -> None:
    """What the check above relies on: Gemini CLI does check its hooks."""
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"hooks": {"AfterAgent": 3}}))

    listed = await _mcp_list(tmp_path)

    assert "Error in: hooks.AfterAgent" in listed, listed
