"""The real Codex asks permission through its `PermissionRequest` hook, installed by
`agentcomms install codex` and trusted in Codex's own review, and the human answers with
`agentcomms approve` / `deny`: the hook prints the decision in Codex's format (the same
``hookSpecificOutput.decision`` as Claude Code's) and the command runs, or the model reads why.
A never-listed command, or an edit of a never-listed file, is refused by its PreToolUse hook
without asking anyone.

One Codex, on its own tmux server, serves the module, in ``on-request`` approval mode; the
scripted model asks to run its command outside the sandbox, which Codex asks the human about
first. Its hooks find the agent by their pane."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.fakes.openai_responses import Step, patch, text, tool
from tests.support.agents import PROMPT_HINT, Attended, CodexPane, attended, codex_with_agentcomms
from tests.support.cli import cli
from tests.support.waiting import eventually

RM = "Bash(rm -rf *)"
ENV = "Edit(*.env)"


Setup = Attended[CodexPane]


@pytest.fixture(scope="module")
async def setup(
    agent_clis: dict[str, Path],
    temporal_env: WorkflowEnvironment,
    tmux_socket_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Setup]:
    root = tmp_path_factory.mktemp("codex-approvals")
    async with attended(
        codex_with_agentcomms, temporal_env.client, tmux_socket_dir, root, never=(RM, ENV)
    ) as a:
        yield a


def escalated(command: str) -> Step:
    """Codex's shell tool running `command` outside its sandbox, which asks the human first."""
    return tool(
        "exec_command",
        cmd=command,
        sandbox_permissions="require_escalated",
        justification="to write the file",
    )


async def test_approved_from_the_terminal_the_command_runs(setup: Setup) -> None:
    codex, model = setup.pane, setup.pane.model
    model.on("make the approved file", escalated("touch approved.txt"), text("Approved made."))
    await codex.type("make the approved file")
    approval = await eventually(setup.approval, timeout=30)
    print(f"listed: {approval}")
    done = await cli(setup.home, "approve", approval["id"])
    assert done.returncode == 0, done.stderr
    await codex.wait_for_screen("Approved made.")
    assert (codex.project / "approved.txt").exists()


async def test_denied_from_the_terminal_the_model_reads_why(setup: Setup) -> None:
    codex, model = setup.pane, setup.pane.model
    await codex.wait_for_screen(PROMPT_HINT)
    model.on("make the denied file", escalated("touch denied.txt"), text("Understood."))
    seen = len(model.tool_results)
    await codex.type("make the denied file")
    approval = await eventually(setup.approval, timeout=30)
    done = await cli(setup.home, "deny", approval["id"], "-m", "not in this folder")
    assert done.returncode == 0, done.stderr
    result = await eventually(lambda: model.result_after(seen), timeout=30)
    print(f"the model read: {result.content!r}")
    assert "not in this folder" in result.content
    await codex.wait_for_screen("Understood.")
    assert not (codex.project / "denied.txt").exists()


async def test_a_never_listed_command_is_refused_without_asking(setup: Setup) -> None:
    codex, model = setup.pane, setup.pane.model
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


async def test_a_never_listed_edit_is_refused_without_asking(setup: Setup) -> None:
    """Codex's edit (apply_patch) reaches the never-list as a patch: a rule's path in any of
    its files refuses all of it."""
    codex, model = setup.pane, setup.pane.model
    await codex.wait_for_screen(PROMPT_HINT)
    edit = (
        "*** Begin Patch\n*** Add File: notes.txt\n+hi\n"
        "*** Add File: config/.env\n+KEY=1\n*** End Patch\n"
    )
    model.on("write the config", patch(edit), text("Could not write it."))
    seen = len(model.tool_results)
    await codex.type("write the config")
    await codex.wait_for_screen("Could not write it.")
    (result,) = model.tool_results[seen:]
    print(f"the model read: {result.content!r}")
    assert f"never-list has {ENV}" in result.content
    assert not (codex.project / "notes.txt").exists()
    assert not (codex.project / "config").exists()
    assert await setup.approval() is None  # no one was asked
