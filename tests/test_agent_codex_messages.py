"""A message sent with `agentcomms send` to the real Codex while it is busy in a turn, while its
approval waits on agentcomms, and while Codex shows its own approval prompt (an approval no one
answered in time is left to the terminal): it waits, reported ``queued``, is typed only once Codex
is at its prompt again, and reaches the model whole, as the human's words.

One Codex, with agentcomms' hooks reporting to a stack and its human at a terminal, serves the
module, in ``on-request`` approval mode; its approvals are left to the terminal after
``APPROVAL_S``. Its reporting hooks post to the gateway's hook door from Codex's own shell, in the
background, as `install` writes them with the door on; the permission hook is a command."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.agents.state import STALE_AFTER
from agentcomms.config import Config
from agentcomms.config.models import ApprovalsConfig
from tests.fakes.openai_responses import Step, text, tool
from tests.support.agents import PROMPT_HINT, Attended, CodexPane, attended, codex_with_agentcomms
from tests.support.cli import cli
from tests.support.home import module_home
from tests.support.tmux import SENT_HEADER
from tests.support.waiting import eventually

Setup = Attended[CodexPane]
APPROVAL_S = 6
# Codex's own approval prompt, shown when its PermissionRequest hook gave no answer.
CODEX_APPROVAL = "Would you like to run the following command?"


@pytest.fixture(scope="module")
async def setup(
    agent_clis: dict[str, Path],
    temporal_env: WorkflowEnvironment,
    tmux_socket_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Setup]:
    root = tmp_path_factory.mktemp("codex-messages")
    with module_home(root):
        async with attended(
            codex_with_agentcomms,
            temporal_env.client,
            tmux_socket_dir,
            root,
            configure=_quick,
            posted=True,
        ) as a:
            yield a


def _quick(cfg: Config) -> Config:
    return cfg.model_copy(update={"approvals": ApprovalsConfig(timeout_s=APPROVAL_S)})


def escalated(command: str) -> Step:
    """Codex's shell tool running `command` outside its sandbox, which asks the human first."""
    return tool(
        "exec_command", cmd=command, sandbox_permissions="require_escalated", justification="to"
    )


async def _send(setup: Setup, message: str) -> dict[str, Any]:
    """`agentcomms send --wait` from the human's terminal, waiting a moment for the typing."""
    done = await cli(
        setup.home, "send", setup.agent_id, message, "--wait", "--timeout", "2", "--json"
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


async def _submitted(setup: Setup, event_id: str) -> list[str]:
    """The message's steps once the agent's UserPromptSubmit carried it."""
    traced = await setup.stack.call("trace", event_id=event_id)
    steps = [s["step"] for s in traced["steps"]]
    return steps if "submitted" in steps else []


async def _is(setup: Setup, state: str) -> bool:
    states = (await setup.stack.call("status"))["agent_states"]
    return bool(states.get(setup.agent_id) == state)


async def test_a_message_sent_mid_turn_waits_then_reaches_the_model(setup: Setup) -> None:
    codex, model = setup.pane, setup.pane.model
    await codex.wait_for_screen(PROMPT_HINT)
    hold = asyncio.Event()
    model.on("count the files", text("Counted them.", hold=hold))
    await codex.type("count the files")
    await eventually(lambda: _is(setup, "busy"))

    sent = await _send(setup, "also list them")
    assert (sent["status"], sent["delivered"]) == ("queued", False)
    assert "also list them" not in codex.screen()  # Codex takes typing mid-turn: none came

    hold.set()
    await codex.wait_for_screen("Counted them.")
    assert await model.wait_for_human("also list them") == f"{SENT_HEADER}also list them"
    assert await eventually(lambda: _submitted(setup, sent["event_id"]))


async def test_a_message_waits_through_codexs_own_approval_prompt(setup: Setup) -> None:
    """Codex's own prompt hides its busy line and takes typed text as keys ("y" approves, a
    letter it does not know is lost): the message waits there too, longer than the state is
    trusted without a hook, until the human answers in the terminal."""
    codex, model = setup.pane, setup.pane.model
    await codex.wait_for_screen(PROMPT_HINT)
    model.on("make the summary", escalated("touch summary.txt"), text("Summary made."))
    await codex.type("make the summary")
    await eventually(setup.approval, timeout=30)

    sent = await _send(setup, "and print it")  # while the approval waits on agentcomms
    assert (sent["status"], sent["delivered"]) == ("queued", False)
    await codex.wait_for_screen(CODEX_APPROVAL, timeout=APPROVAL_S + 30)
    await asyncio.sleep(STALE_AFTER.total_seconds() + 3)
    assert CODEX_APPROVAL in codex.screen()  # nothing typed into it: still unanswered
    assert await _is(setup, "waiting")
    assert not (codex.project / "summary.txt").exists()
    assert model.human_texts[-1] == "make the summary"

    await codex.answer(CODEX_APPROVAL, "y")  # the human approves, in the terminal
    await codex.wait_for_screen("Summary made.")
    assert (codex.project / "summary.txt").exists()
    assert await model.wait_for_human("and print it") == f"{SENT_HEADER}and print it"
    assert await eventually(lambda: _submitted(setup, sent["event_id"]))
