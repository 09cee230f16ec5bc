"""The real Codex asks permission through its `PermissionRequest` hook, installed by
`agentcomms install codex` and trusted in Codex's own review, and the human answers with
`agentcomms approve` / `deny`: the hook prints the decision in Codex's format (the same
``hookSpecificOutput.decision`` as Claude Code's) and the command runs, or the model reads why.
A never-listed command is refused by its PreToolUse hook without asking anyone.

One Codex, on its own tmux server, serves the module, in ``on-request`` approval mode; the
scripted model asks to run its command outside the sandbox, which Codex asks the human about
first. Its hooks find the agent by their pane."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.agents.install import Target, plan
from tests.fakes.openai_responses import FakeResponses, Step, ToolResult, text, tool
from tests.support.agents import CODEX_HOOKS_REVIEW, PROMPT_HINT, CodexPane, start_codex
from tests.support.cli import AGENTCOMMS, cli, cli_home
from tests.support.stack import Stack, register, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

RM = "Bash(rm -rf *)"


@dataclass
class Setup:
    stack: Stack
    codex: CodexPane
    agent_id: str
    home: Path

    async def approval(self) -> dict[str, Any] | None:
        done = await cli(self.home, "approvals", "--json")
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)["approvals"]
        return next((r for r in rows if r["agent_id"] == self.agent_id), None)


@pytest.fixture(scope="module")
async def setup(
    temporal_env: WorkflowEnvironment,
    tmux_socket_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Setup]:
    root = tmp_path_factory.mktemp("codex-approvals")
    server = Tmux(tmux_socket_dir / f"x-{uuid.uuid4().hex[:8]}")
    model = FakeResponses()
    async with running_stack(temporal_env.client, root / "stack") as stack, model.server:

        def install(home: Path, project: Path) -> None:
            target = Target("codex", home=home, project=project, argv=(AGENTCOMMS,), never=(RM,))
            plan(target).apply()

        try:
            codex = await start_codex(
                server,
                root / "codex",
                model,
                setup=install,
                until=CODEX_HOOKS_REVIEW,
                settings={"approval_policy": "on-request"},
                env={"AGENTCOMMS_SOCKET": str(stack.cfg.server.socket())},
            )
            await codex.answer(CODEX_HOOKS_REVIEW, "2", "Enter")  # "Trust all and continue"
            await codex.wait_for_screen(PROMPT_HINT)
            agent_id = f"codex-{uuid.uuid4().hex[:6]}"
            await register(stack, agent_id, server, codex.target, submit_delay_ms=300)
            yield Setup(stack, codex, agent_id, cli_home(root, stack))
        finally:
            server.run("kill-server", check=False)


def escalated(command: str) -> Step:
    """Codex's shell tool running `command` outside its sandbox, which asks the human first."""
    return tool(
        "exec_command",
        cmd=command,
        sandbox_permissions="require_escalated",
        justification="to write the file",
    )


def _new_result(model: FakeResponses, seen: int) -> ToolResult | None:
    return model.tool_results[seen] if len(model.tool_results) > seen else None


async def test_approved_from_the_terminal_the_command_runs(setup: Setup) -> None:
    codex, model = setup.codex, setup.codex.model
    model.on("make the approved file", escalated("touch approved.txt"), text("Approved made."))
    await codex.type("make the approved file")
    approval = await eventually(setup.approval, timeout=30)
    print(f"listed: {approval}")
    done = await cli(setup.home, "approve", approval["id"])
    assert done.returncode == 0, done.stderr
    await codex.wait_for_screen("Approved made.")
    assert (codex.project / "approved.txt").exists()


async def test_denied_from_the_terminal_the_model_reads_why(setup: Setup) -> None:
    codex, model = setup.codex, setup.codex.model
    await codex.wait_for_screen(PROMPT_HINT)
    model.on("make the denied file", escalated("touch denied.txt"), text("Understood."))
    seen = len(model.tool_results)
    await codex.type("make the denied file")
    approval = await eventually(setup.approval, timeout=30)
    done = await cli(setup.home, "deny", approval["id"], "-m", "not in this folder")
    assert done.returncode == 0, done.stderr
    result = await eventually(lambda: _new_result(model, seen), timeout=30)
    print(f"the model read: {result.content!r}")
    assert "not in this folder" in result.content
    await codex.wait_for_screen("Understood.")
    assert not (codex.project / "denied.txt").exists()


async def test_a_never_listed_command_is_refused_without_asking(setup: Setup) -> None:
    codex, model = setup.codex, setup.codex.model
    await codex.wait_for_screen(PROMPT_HINT)
    (codex.project / "build").mkdir()
    model.on("clean the build", escalated("rm -rf build"), text("Could not clean."))
    seen = len(model.tool_results)
    await codex.type("clean the build")
    await codex.wait_for_screen("Could not clean.")
    (result,) = model.tool_results[seen:]
    print(f"the model read: {result.content!r}")
    assert f"never-list has {RM}" in result.content
    assert (codex.project / "build").exists()
    assert await setup.approval() is None  # no one was asked
