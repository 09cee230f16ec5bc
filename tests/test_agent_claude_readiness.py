"""The real Claude Code, its hooks installed by `agentcomms install claude-code`, reporting through
the gateway to a real mailbox: a message sent mid-turn waits for the turn to end, and a message
sent while a permission dialog is open is not typed into it (the tool is not approved by it, the
model does not see it) and is typed once the human answered the dialog.

One Claude, on its own tmux server, serves the module; its hooks find the agent by their pane.
Its reporting hooks (the prompt, tool use, the turn's end, a dialog's notification) are posted to
the gateway's hook door, as `install` writes them with the door on; the permission hook is a
command."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.agents.install import Target
from agentcomms.agents.install_agents import plan
from tests.fakes.anthropic import FakeAnthropic, bash, text
from tests.support.agents import (
    AUTO_MODE_DIALOG,
    PROCEED_DIALOG,
    ClaudePane,
    claude_with_agentcomms,
    start_claude,
)
from tests.support.cli import AGENTCOMMS
from tests.support.home import module_home
from tests.support.stack import Stack, register
from tests.support.tmux import SENT_HEADER, Tmux
from tests.support.waiting import eventually

# Every test here starts a real agent.
pytestmark = pytest.mark.usefixtures("agent_clis")

# Long enough for a message that was going to be typed to have reached the model.
QUIET_S = 3.0


@dataclass
class Setup:
    stack: Stack
    claude: ClaudePane
    agent_id: str

    async def state(self) -> dict[str, Any] | None:
        listed = await self.stack.call("agents")
        return next((a for a in listed["agents"] if a["id"] == self.agent_id), None)

    async def registered(self) -> dict[str, Any] | None:
        row = await self.state()
        return row if row is not None and row["target"] is not None else None

    async def waiting_for(self, what: str) -> dict[str, Any] | None:
        row = await self.state_is("waiting")
        return row if row is not None and row["waiting_for"] == what else None

    async def state_is(self, state: str) -> dict[str, Any] | None:
        row = await self.state()
        return row if row is not None and row["state"] == state else None


@pytest.fixture(scope="module")
async def setup(
    temporal_env: WorkflowEnvironment,
    tmux_socket_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Setup]:
    root = tmp_path_factory.mktemp("claude-ready")
    server = Tmux(tmux_socket_dir / f"r-{uuid.uuid4().hex[:8]}")
    with module_home(root):
        async with claude_with_agentcomms(temporal_env.client, root, server, posted=True) as (
            stack,
            claude,
            agent,
        ):
            yield Setup(stack, claude, agent)


async def turn_running(setup: Setup, words: str, release: asyncio.Event) -> None:
    """The human types `words` in the terminal; the model holds its answer until `release`."""
    setup.claude.model.on(words, text(f"Answered: {words}", hold=release))
    await setup.claude.type(words)
    await setup.claude.model.wait_for_human(words)
    await eventually(lambda: setup.state_is("busy"))


async def test_a_message_sent_mid_turn_waits_and_is_typed_after_stop(setup: Setup) -> None:
    model = setup.claude.model
    release = asyncio.Event()
    await turn_running(setup, "summarise the repository", release)

    await setup.stack.call("send", agent_id=setup.agent_id, message="then list the open issues")
    await asyncio.sleep(QUIET_S)
    assert not any("open issues" in t for t in model.human_texts)  # it waits for the turn

    release.set()
    await setup.claude.wait_for_screen("Answered: summarise the repository")
    # After Stop: typed, submitted, and read by the model in a turn of its own.
    assert await model.wait_for_human("open issues") == f"{SENT_HEADER}then list the open issues"
    event = await eventually(lambda: setup.state_is("ready"), timeout=30)
    assert event["waiting_for"] is None


async def test_messages_that_waited_reach_claude_as_one_prompt_oldest_first(setup: Setup) -> None:
    model = setup.claude.model
    release = asyncio.Event()
    await turn_running(setup, "refactor the parser", release)
    for words in ("first, the tests", "second, the docs", "third, the changelog"):
        await setup.stack.call("send", agent_id=setup.agent_id, message=words)
    await asyncio.sleep(QUIET_S)
    assert not any("the docs" in t for t in model.human_texts)

    release.set()
    # One turn reads all three, in the order they were sent, each behind its own header.
    prompt = await model.wait_for_human("the docs")
    assert prompt == "\n".join(
        f"{SENT_HEADER}{words}"
        for words in ("first, the tests", "second, the docs", "third, the changelog")
    )
    await eventually(lambda: setup.state_is("ready"), timeout=30)
    assert sum("the changelog" in t for t in model.human_texts) == 1


async def test_a_turn_ended_by_esc_is_noticed_and_the_humans_draft_is_not_joined(
    setup: Setup,
) -> None:
    """Claude Code sends no hook when the human presses Esc mid-turn, and puts the cancelled
    prompt back in its input box: the pane, looked at once the state is old, shows the human's
    draft there, so the message waits until the box is empty, then goes as a prompt of its own."""
    model = setup.claude.model
    release = asyncio.Event()
    await turn_running(setup, "index the whole monorepo", release)
    await setup.stack.call("send", agent_id=setup.agent_id, message="are you still there?")

    await setup.claude.keys("Escape")
    try:
        drafted = await eventually(lambda: setup.state_is("waiting"), timeout=60)
    finally:
        release.set()  # the cancelled request's stream ends
    assert drafted["waiting_for"] == "the human (a draft in the input box)"
    assert not any("still there" in t for t in model.human_texts)

    await setup.claude.keys("C-u")  # the human clears the box
    typed = await model.wait_for_human("still there", timeout=60)
    assert typed == f"{SENT_HEADER}are you still there?"


async def test_a_message_during_a_permission_dialog_is_not_typed_into_it(setup: Setup) -> None:
    claude, model = setup.claude, setup.claude.model
    model.on("make the gate file", bash("touch gate.txt"), text("Gate made."))
    await claude.type("make the gate file")
    await claude.wait_for_screen(PROCEED_DIALOG)
    # The dialog's Notification may reach the mailbox before the PermissionRequest that names
    # the tool (its hook is slower to report): "a permission prompt" first, then the tool.
    asked = "permission for Bash: touch gate.txt"
    await eventually(lambda: setup.waiting_for(asked))

    await setup.stack.call("send", agent_id=setup.agent_id, message="stop, do not run anything")
    await asyncio.sleep(QUIET_S)
    # Not typed into the dialog: it is still open, the tool did not run, the model saw nothing.
    assert PROCEED_DIALOG in claude.screen()
    assert not (claude.project / "gate.txt").exists()
    assert not any("do not run" in t for t in model.human_texts)

    await claude.answer(PROCEED_DIALOG, "Enter")  # the human approves, in the terminal
    await claude.wait_for_screen("Gate made.")
    assert (claude.project / "gate.txt").exists()
    # The turn ended: now the human's words reach the model, as a prompt of their own.
    assert await model.wait_for_human("do not run") == f"{SENT_HEADER}stop, do not run anything"


async def test_send_wait_reports_the_message_submitted_by_claude(setup: Setup) -> None:
    await eventually(lambda: setup.state_is("ready"), timeout=30)
    result = await setup.stack.call(
        "send", agent_id=setup.agent_id, message="say hello", wait=True, timeout=30
    )
    assert (result["status"], result["delivered"]) == ("submitted", True)
    assert await setup.claude.model.wait_for_human("say hello") == f"{SENT_HEADER}say hello"


async def test_nothing_is_typed_into_the_first_start_dialog(
    setup: Setup, tmux: Tmux, tmp_path: Path
) -> None:
    """Claude Code's SessionStart fires while its first-start dialog is open: the hook says
    ready, the pane says otherwise, and the pane wins."""
    agent_id = f"first-{uuid.uuid4().hex[:6]}"
    # Registered before Claude starts, so its SessionStart finds the agent.
    await register(setup.stack, agent_id, tmux, "first:0.0", submit_delay_ms=300)
    first = Setup(setup.stack, setup.claude, agent_id)
    await eventually(first.registered)
    model = FakeAnthropic()
    async with model.server:

        def install(home: Path, project: Path) -> None:
            plan(Target("claude-code", home=home, project=project, argv=(AGENTCOMMS,))).apply()

        socket = str(setup.stack.cfg.server.socket())
        claude = await start_claude(
            tmux, tmp_path / "first", model, name="first", skip_auto_dialog=False,
            setup=install, env={"AGENTCOMMS_SOCKET": socket},
        )  # fmt: skip
        await eventually(lambda: first.state_is("ready"))  # SessionStart, under the dialog
        await setup.stack.call("send", agent_id=agent_id, message="hello after the dialog")
        waiting = await eventually(lambda: first.state_is("waiting"))
        assert waiting["waiting_for"] == "a dialog in the pane"
        await asyncio.sleep(QUIET_S)
        assert AUTO_MODE_DIALOG in claude.screen()  # nothing answered it
        assert model.human_texts == []

        await claude.answer(AUTO_MODE_DIALOG, "Enter")
        # No hook follows the dialog: the pane, looked at again, now shows the prompt.
        assert await model.wait_for_human("after the dialog", timeout=60) == (
            f"{SENT_HEADER}hello after the dialog"
        )
