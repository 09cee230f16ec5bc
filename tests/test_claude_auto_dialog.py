"""The real Claude Code 2.1.337 in auto mode, its own default (no permission mode written), with
agentcomms' hooks: its model (scripted) does not pass auto mode's server-side safety check
through, so a call the check must judge runs no hook and asks in Claude Code's own dialogs.
The first, "Auto mode can't check actions in this session", reaches the human as a notice; the
question that follows, "Do you want to proceed?", is read exactly and becomes an approval,
answered from a surface: its keys are pressed in the pane, each checked on screen by tmux."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.bridge.own_dialog import QUESTION
from tests.fakes.anthropic import bash, text
from tests.support.agents import Attended, ClaudePane, claude_with_agentcomms
from tests.support.cli import cli, cli_home
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

CANNOT_CHECK = "Auto mode can't check actions in this session"
STAY = "Enter to stay in auto mode"


@pytest.fixture(scope="module")
async def auto_claude(
    agent_clis: dict[str, Path],
    temporal_env: WorkflowEnvironment,
    tmux_socket_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Attended[ClaudePane]]:
    root = tmp_path_factory.mktemp("auto-claude")
    server = Tmux(tmux_socket_dir / "auto")
    async with claude_with_agentcomms(temporal_env.client, root, server, default_mode=None) as (
        stack,
        pane,
        agent_id,
    ):
        yield Attended(stack, pane, agent_id, cli_home(root, stack))


async def _notices(human: Attended[ClaudePane]) -> list[str]:
    events = await human.stack.store.latest_events(human.agent_id, 50)
    return [e.payload["text"] for e in events if e.payload.get("notice") == "dialog"]


async def _asks(human: Attended[ClaudePane], words: str) -> dict[str, Any]:
    """The human's approval, once Claude Code's own question for `words` is one."""
    await human.pane.wait_for_screen(QUESTION)

    async def asked() -> dict[str, Any] | None:
        approval = await human.approval()
        return approval if approval is not None and words in approval["input"] else None

    return await eventually(asked, timeout=40)


async def test_auto_modes_check_is_told_and_its_question_is_approved_from_a_surface(
    auto_claude: Attended[ClaudePane], tmp_path: Path
) -> None:
    human, claude = auto_claude, auto_claude.pane
    made = tmp_path / "made.txt"
    claude.model.on("make the file", bash(f"touch {made}"), text("Made it."))
    await claude.type("make the file")

    [told] = await eventually(lambda: _notices(human), timeout=40)
    assert CANNOT_CHECK in told and "no hook reported" in told
    assert await human.approval() is None  # a notice: it offers no choice to make from afar
    await claude.answer(STAY, "Enter")  # the human, at the terminal, stays in auto mode

    approval = await _asks(human, f"touch {made}")
    assert approval["tool"] == "Bash command"
    # What the agent waits for is that approval, answerable from anywhere, not "a dialog on
    # screen (answer it in the terminal)".
    listed = json.loads((await cli(human.home, "agents", "--json")).stdout)["agents"]
    (row,) = [a for a in listed if a["id"] == human.agent_id]
    assert (row["state"], row["waiting_for"]) == (
        "waiting",
        f"its own dialog, asked as approval {approval['id']} (answer it from any surface, or "
        "in the terminal)",
    )
    done = await cli(human.home, "approve", approval["id"])
    assert done.returncode == 0, done.stderr

    await claude.wait_for_screen("Made it.")
    assert made.exists()
    assert await _notices(human) == [told]  # the question was an approval, not another notice


async def test_a_denial_cancels_the_call_and_one_answered_in_the_terminal_closes(
    auto_claude: Attended[ClaudePane], tmp_path: Path
) -> None:
    human, claude = auto_claude, auto_claude.pane
    denied, left = tmp_path / "denied.txt", tmp_path / "left.txt"
    claude.model.on("make the denied file", bash(f"touch {denied}"), text("Made denied."))
    await claude.type("make the denied file")
    approval = await _asks(human, f"touch {denied}")
    done = await cli(human.home, "deny", approval["id"], "-m", "use the other file")
    assert done.returncode == 0, done.stderr
    await claude.wait_for_screen("Interrupted")
    assert not denied.exists()

    async def words_sent() -> bool | None:
        events = await human.stack.store.latest_events(human.agent_id, 50)
        sent = [e.payload.get("text") for e in events if e.type == "human_message"]
        return True if "use the other file" in sent else None

    # Claude asks "What should Claude do instead?": the denial's words are the next message.
    assert await eventually(words_sent, timeout=20)

    claude.model.on("make the left file", bash(f"touch {left}"), text("Made left."))
    await claude.type("make the left file")
    approval = await _asks(human, f"touch {left}")
    await claude.answer(QUESTION, "Escape")  # the human answers at the terminal instead

    async def closed() -> dict[str, Any] | None:
        listed = await cli(human.home, "approvals", "--json")
        return None if approval["id"] in listed.stdout else {"closed": True}

    await eventually(closed, timeout=30)
    assert not left.exists()
