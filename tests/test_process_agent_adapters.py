"""Claude Code and Codex as process agents, through Zed's ACP adapters (`--kind claude-code`,
`--kind codex`, at the versions the kinds pin), their models the scripted Anthropic and OpenAI
servers: a message is the agent's prompt, its reply streams back, and its shell call asks
permission through an approval whose answers are the adapter's own options; the chosen one runs
the command. One stack for the module; each adapter runs once."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.acp.kinds import KINDS
from tests.fakes.anthropic import FakeAnthropic, bash
from tests.fakes.openai_responses import FakeResponses, text, tool
from tests.support.agents import (
    _PACKAGES,
    API_KEY,
    CODEX_CATALOG_MODEL,
    prepare_claude_home,
    prepare_codex_home,
)
from tests.support.stack import Stack, in_state, open_approvals, running_stack
from tests.support.waiting import eventually


@pytest.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    async with running_stack(temporal_env.client, tmp_path_factory.mktemp("stack")) as s:
        yield s


def with_env(env: dict[str, str], program: Path) -> list[str]:
    """The adapter's command with only this environment, as a user's shell would give it: the
    test machine's own keys and settings cannot leak in."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    return ["env", "-i", f"PATH={path}", *(f"{k}={v}" for k, v in env.items()), str(program)]


async def a_turn_and_an_approval(
    stack: Stack, agent: str, project: Path, command: list[str], allow: str
) -> dict[str, Any]:
    """Start the agent, ask it the capital of France (its reply, streamed, is its last reply),
    then to make a file: the approval's `allow` option runs the command. The approval."""
    await stack.call("start_agent", agent_id=agent, dir=str(project), command=command)
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=90)

    sent = await stack.call(
        "send", agent_id=agent, message="what is the capital of France?", wait=True, timeout=60
    )
    assert sent["status"] == "submitted", sent
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=60)
    peeked = await stack.call("peek", agent_id=agent)
    assert peeked["shows"] == "last_reply" and peeked["text"] == "Paris, of course.", peeked

    await stack.call("send", agent_id=agent, message="please make the file")
    [approval] = await eventually(lambda: open_approvals(stack, agent), timeout=60)
    assert "touch made.txt" in approval["input"], approval
    await eventually(lambda: in_state(stack, agent, "waiting"))
    await stack.call("approval_decide", id=approval["id"], behavior="answer", answer=allow)
    await eventually(lambda: (project / "made.txt").exists(), timeout=60)
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=60)
    peeked = await stack.call("peek", agent_id=agent)
    assert peeked["text"] == "Made it.", peeked

    assert (await stack.call("stop_agent", agent_id=agent))["stopped"]
    await eventually(lambda: in_state(stack, agent, "offline"))
    found: dict[str, Any] = approval
    return found


def test_ci_installs_the_agents_and_adapters_at_the_versions_the_tests_and_kinds_pin() -> None:
    ci = (Path(__file__).parents[1] / ".ci" / "run").read_text()
    loop = ci[ci.index("for pkg in ") + len("for pkg in ") :]
    installed = set(loop[: loop.index("; do")].replace("\\\n", " ").split())
    assert installed == set(_PACKAGES.values())
    assert {KINDS["claude-code"].package, KINDS["codex"].package} <= installed


async def test_claude_code_through_its_adapter_answers_and_asks_permission(
    stack: Stack, agent_clis: dict[str, Path], tmp_path: Path
) -> None:
    model = FakeAnthropic()
    model.on("capital of France", text("Paris, of course."))
    model.on("make the file", bash("touch made.txt"), text("Made it."))
    home, project = tmp_path / "home", tmp_path / "project"
    # Manual permission mode: its Bash tool asks before it runs.
    prepare_claude_home(home, project)
    async with model.server:
        env = {
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": model.base_url,
            "ANTHROPIC_API_KEY": API_KEY,
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        command = with_env(env, agent_clis["claude-agent-acp"])
        approval = await a_turn_and_an_approval(
            stack, stack.agent_id("claude-acp"), project, command, "Allow"
        )
        said = await model.wait_for_human("capital of France")
        assert said.startswith("[cli:local from ")  # the header a pane would show
    # The adapter's own options, as its ACP request names them.
    assert approval["options"] == ["Always Allow", "Allow", "Reject"]


async def test_codex_through_its_adapter_answers_and_asks_permission(
    stack: Stack, agent_clis: dict[str, Path], tmp_path: Path
) -> None:
    model = FakeResponses()
    model.on("capital of France", text("Paris, of course."))
    # Its shell tool outside the sandbox, which Codex asks the human about first.
    escalated = tool(
        "exec_command",
        cmd="touch made.txt",
        sandbox_permissions="require_escalated",
        justification="to write the file",
    )
    model.on("make the file", escalated, text("Made it."))
    home, project = tmp_path / "home", tmp_path / "project"
    async with model.server:
        prepare_codex_home(
            home, project, model, {**CODEX_CATALOG_MODEL, "approval_policy": "on-request"}
        )
        env = {"HOME": str(home), "SCRIPTED_OPENAI_KEY": "sk-test-agentcomms"}
        command = with_env(env, agent_clis["codex-acp"])
        approval = await a_turn_and_an_approval(
            stack, stack.agent_id("codex-acp"), project, command, "Yes, proceed"
        )
        said = await model.wait_for_human("capital of France")
        assert said.startswith("[cli:local from ")
    assert approval["options"][0] == "Yes, proceed"
    assert approval["options"][-1] == "No, and tell Codex what to do differently"
