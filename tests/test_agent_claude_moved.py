"""The real Claude Code's pane closed under a flood of messages, and Claude started again in a new
pane that the human registers with `agentcomms agents register`: every message reaches the new
Claude's model once, in the order sent, and `send --wait`, `trace` and `agents` say at each moment
what is true (waiting for the pane, then typed there and submitted).

Claude with agentcomms' hooks, and its human at a terminal; the new Claude shares the fake model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentcomms.agents.install import Target
from agentcomms.agents.install_agents import plan
from tests.support.agents import Attended, ClaudePane, attended_claude, start_claude
from tests.support.cli import AGENTCOMMS, cli
from tests.support.tmux import SENT_HEADER
from tests.support.waiting import eventually

# Every test here starts a real agent.
pytestmark = pytest.mark.usefixtures("agent_clis")

__all__ = ["attended_claude"]

FLOOD = 300


async def traced(a: Attended[ClaudePane], event_id: str) -> tuple[str, list[str]]:
    """What `agentcomms trace` says of the message, and its steps by name (from `--json`)."""
    said = await cli(a.home, "trace", event_id)
    assert said.returncode == 0, said.stderr
    listed = await cli(a.home, "trace", event_id, "--json")
    assert listed.returncode == 0, listed.stderr
    return said.stdout, [s["step"] for s in json.loads(listed.stdout)["steps"]]


def sent_lines(prompts: list[str]) -> list[str]:
    """The messages in what the model read, each without its header, in order."""
    lines = (line for prompt in prompts for line in prompt.splitlines())
    return [line.removeprefix(SENT_HEADER) for line in lines if line.startswith(SENT_HEADER)]


@pytest.mark.timeout(240)
async def test_a_flood_for_a_closed_pane_reaches_the_new_claude_once_in_order(
    attended_claude: Attended[ClaudePane], tmp_path: Path
) -> None:
    a, claude = attended_claude, attended_claude.pane
    await claude.wait_ready()
    tmux = claude.tmux
    tmux.run("new-session", "-d", "-s", "elsewhere")  # the tmux server outlives the pane
    tmux.run("kill-session", "-t", claude.target.split(":")[0])  # the human closes Claude's pane

    words = [f"flood {i:03d}" for i in range(FLOOD)]
    ids = [(await a.stack.call("send", agent_id=a.agent_id, message=m))["event_id"] for m in words]
    done = await cli(a.home, "send", a.agent_id, "the last one", "--wait", "--timeout", "3")
    assert done.returncode == 0, done.stderr
    first_line = done.stdout.splitlines()[0]
    assert first_line.endswith(": queued"), done.stdout  # not typed: no pane
    assert "unreachable" in done.stdout and "the message waits" in done.stdout
    last_id = first_line.split()[1].rstrip(":")
    waiting, steps = await traced(a, last_id)
    assert steps == ["accepted", "queued"]
    assert f"position {FLOOD + 1} of {FLOOD + 1}" in waiting
    assert f"pane {claude.target} on host {a.stack.host} is missing since" in waiting
    row = await a.row()
    assert (row["status"], row["pending"]) == ("unreachable", FLOOD + 1)
    read_before = len(claude.model.human_texts)

    def install(home: Path, project: Path) -> None:
        plan(Target("claude-code", home=home, project=project, argv=(AGENTCOMMS,))).apply()

    socket = str(a.stack.cfg.server.socket())
    again = await start_claude(
        tmux, tmp_path / "again", claude.model, name="again", setup=install,
        env={"AGENTCOMMS_SOCKET": socket},
    )  # fmt: skip
    done = await cli(
        a.home, "agents", "register", a.agent_id, "--tmux", again.target,
        "--socket", str(tmux.socket), "--submit-delay-ms", "300",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    await claude.model.wait_for_human("the last one", timeout=180)
    read = claude.model.human_texts[read_before:]
    # Every message once, in the order sent: those that waited go fifty to a prompt.
    assert sent_lines(read) == [*words, "the last one"]
    assert len(read) == 7
    settled, steps = await traced(a, last_id)
    assert steps == ["accepted", "queued", "typed", "submitted"]
    assert f"into pane {again.target}" in settled
    assert "the agent's UserPromptSubmit carried it" in settled
    for event_id in (ids[0], ids[FLOOD // 2], ids[-1]):  # each prompt's first, one inside, the end
        assert (await traced(a, event_id))[1][-2:] == ["typed", "submitted"]
    row = await eventually(lambda: _settled(a), timeout=30)
    assert (row["status"], row["target"]) == ("online", again.target)


async def _settled(a: Attended[ClaudePane]) -> dict[str, Any] | None:
    row = await a.row()
    return row if row["pending"] == 0 and row["state"] == "ready" else None
