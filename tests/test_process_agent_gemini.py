"""The real Gemini CLI as a process agent, over its own ACP (`gemini --acp`), its model the
scripted Gemini API: a message is its prompt, its shell call asks permission through an
approval whose buttons are Gemini's own options, and the answer runs the command."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.acp.kinds import KINDS
from tests.fakes.gemini import FakeGemini, shell, text
from tests.support.agents import GEMINI_API_KEY, GEMINI_VERSION, prepare_gemini_home
from tests.support.stack import Stack, in_state, open_approvals, running_stack
from tests.support.waiting import eventually


@pytest.fixture
async def gemini_model(agent_clis: dict[str, Path]) -> AsyncIterator[FakeGemini]:
    model = FakeGemini()
    async with model.server:
        yield model


@pytest.fixture
async def stack(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Stack]:
    async with running_stack(temporal_env.client, tmp_path / "stack") as s:
        yield s


def test_the_gemini_kind_runs_the_version_the_tests_run() -> None:
    assert KINDS["gemini"].package == f"@google/gemini-cli@{GEMINI_VERSION}"
    assert KINDS["gemini"].args == ("--acp",)


async def test_gemini_over_acp_takes_a_message_and_asks_permission_through_an_approval(
    stack: Stack, gemini_model: FakeGemini, agent_clis: dict[str, Path], tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    prepare_gemini_home(home, project)
    gemini_model.on("capital of France", text("Paris."))
    gemini_model.on("make the file", shell("touch made.txt"), text("Made it."))
    # Gemini's own environment, as a user's shell would give it: the command carries it.
    command = [
        "env",
        f"HOME={home}",
        f"GEMINI_API_KEY={GEMINI_API_KEY}",
        f"GOOGLE_GEMINI_BASE_URL={gemini_model.base_url}",
        str(agent_clis["gemini"]),
        *KINDS["gemini"].args,
    ]
    agent = stack.agent_id("gemini-acp")
    await stack.call("start_agent", agent_id=agent, dir=str(project), command=command)
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=90)

    sent = await stack.call(
        "send", agent_id=agent, message="what is the capital of France?", wait=True, timeout=60
    )
    assert sent["status"] == "submitted", sent
    said = await gemini_model.wait_for_human("capital of France", timeout=60)
    assert said.startswith("[cli:local from ")  # the header a pane would show
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=60)

    await stack.call("send", agent_id=agent, message="please make the file")
    [approval] = await eventually(lambda: open_approvals(stack, agent), timeout=60)
    assert "touch made.txt" in approval["input"], approval
    # Gemini CLI 0.61.0's own options, as its ACP request names them.
    assert approval["options"] == ["Allow for this session", "Allow", "Reject"]
    await eventually(lambda: in_state(stack, agent, "waiting"))
    await stack.call("approval_decide", id=approval["id"], behavior="answer", answer="Allow")
    await eventually(lambda: (project / "made.txt").exists(), timeout=60)
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=60)

    assert (await stack.call("stop_agent", agent_id=agent))["stopped"]
    await eventually(lambda: in_state(stack, agent, "offline"))
