"""The real Gemini CLI running as a Unix user of its own, set up as docs/agents/own-user.md
says: a user made for it (by this test, removed after), Gemini CLI's package where that user can
run it with the system's node, agentcomms' hooks installed by that user with its agent id and
remote approvals (read from that user's own agentcomms config: it cannot read the human's), its
pane in the human's tmux running it through `runuser`, its hooks reaching agentcomms only
through the hooks' own door. A message is typed into it; its shell command, asked through its
`BeforeTool` hook with its own dialog skipped, reaches the human's approvals and is answered
there; and a process it starts can neither approve its open request (on the door or with
`agentcomms approve`) nor reach the human's socket, config, deployment key or console token.

One Gemini serves the module; its scripted model keeps every test's words."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.fakes.gemini import FakeGemini, shell, text, tool
from tests.support.agents import (
    AGENTS_PREFIX,
    GEMINI_API_KEY,
    GEMINI_DIALOG,
    GeminiPane,
    prepare_gemini_home,
)
from tests.support.own_user import (
    OwnSetup,
    OwnUser,
    doors_tried,
    humans_stack,
    install_as,
    own_file_asked,
    own_file_made,
)

GEMINI_PACKAGE = AGENTS_PREFIX / "node_modules" / "@google" / "gemini-cli"
Setup = OwnSetup[GeminiPane]


@pytest.fixture(scope="module")
async def setup(
    agent_clis: dict[str, Path],
    own_user: OwnUser,
    open_folder: Path,
    temporal_env: WorkflowEnvironment,
    tmux_socket_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Setup]:
    user = own_user
    user.node_program("gemini", GEMINI_PACKAGE, "bundle/gemini.js")
    root = tmp_path_factory.mktemp("gemini-own-user")
    model = FakeGemini()
    # Only install reads approvals.remote: the human's config has no need of it.
    agent = {"target": "agent:0.0"}
    async with (
        model.server,
        humans_stack(open_folder, temporal_env.client, root, agent, tmux_socket_dir) as human,
    ):
        agent_id = human.agent_id
        prepare_gemini_home(user.home, user.project)
        # What install reads of the config, in the agent's user's own: yours is closed to it.
        own_config = user.home / ".agentcomms" / "config.json"
        own_config.parent.mkdir(mode=0o700)
        own_config.write_text(json.dumps({"agents": {agent_id: {"approvals": {"remote": True}}}}))
        own_config.chmod(0o600)
        user.chown(user.home)
        env = {"HOME": str(user.home), "PATH": f"{user.bin}:/usr/bin:/bin"}
        said = await install_as(user, env, "gemini", "--agent", agent_id)
        assert f"has no agents.{agent_id}" not in said, said
        variables = {
            **env,
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "GEMINI_API_KEY": GEMINI_API_KEY,
            "GOOGLE_GEMINI_BASE_URL": model.base_url,
            "AGENTCOMMS_SOCKET": str(human.door),
        }
        await human.start_agent(user, variables, "gemini")
        gemini = GeminiPane(human.tmux, "agent:0.0", user.home, user.project, model)
        await gemini.wait_ready(timeout=90)
        setup = await human.registered(gemini, user)
        # Gemini queues prompts while its MCP servers start: one turn first.
        model.on("warm up", text("Warm."))
        await gemini.type("warm up")
        await gemini.wait_for_screen("Warm.", timeout=60)
        yield setup


async def test_a_message_typed_into_it_asks_the_human_and_the_answer_runs_it(
    setup: Setup,
) -> None:
    """The human's message is typed into its pane; the command it then runs waits on the
    human's approvals (Gemini's own dialog skipped), and the human's answer runs it, as the
    agent's user."""
    await setup.pane.wait_ready()
    approval = await own_file_asked(setup, shell("touch own.txt"), text("Own file made."))
    assert GEMINI_DIALOG not in setup.pane.screen()
    await own_file_made(setup, approval)


async def test_what_it_starts_cannot_approve_its_open_request_nor_read_the_humans_secrets(
    setup: Setup,
) -> None:
    def tries(command: str) -> Any:
        return tool("run_shell_command", command=command, description="Try", is_background=True)

    await doors_tried(setup, tries, shell("touch second.txt"), text("Second made."))
