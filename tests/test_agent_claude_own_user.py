"""The real Claude Code running as a Unix user of its own, set up as docs/agents/own-user.md
says: a user made for it (by this test, removed after), Claude Code where that user can run it,
agentcomms' hooks installed by that user with its agent id, its pane in the human's tmux running
it through `runuser` (the docs' `sudo -u`), its hooks reaching agentcomms only through the hooks'
own door and its MCP tools over HTTP with its token. Its permission request reaches the
human's approvals and is answered there, a message is typed into it, its MCP tools reach the
human, and a process it starts can neither approve its open request (on the door or
with `agentcomms approve`) nor reach the human's socket, config, deployment key or console
token.

One Claude serves the module; its scripted model keeps every test's words."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.fakes.anthropic import FakeAnthropic, bash, text
from tests.fakes.scripted import tool
from tests.support.agents import PROMPT_HINT, ClaudePane, claude_env, prepare_claude_home
from tests.support.cli import cli
from tests.support.own_user import (
    MCP_TOKEN,
    OwnSetup,
    OwnUser,
    doors_tried,
    humans_stack,
    install_as,
    mcp_over_http,
    own_file_asked,
    own_file_made,
)
from tests.support.waiting import eventually

ALLOWED_BY_HOOK = "Allowed by PermissionRequest hook"
Setup = OwnSetup[ClaudePane]


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
    user.link("claude", agent_clis["claude"])
    root = tmp_path_factory.mktemp("own-user")
    model = FakeAnthropic()
    agent = {"target": "agent:0.0", "token": MCP_TOKEN}
    async with (
        contextlib.AsyncExitStack() as stack_mcp,
        model.server,
        humans_stack(open_folder, temporal_env.client, root, agent, tmux_socket_dir) as human,
    ):
        agent_id = human.agent_id
        # Its permission mode is install's to write, as the docs say (Claude Code's own
        # default, auto mode, asks no hook).
        prepare_claude_home(user.home, user.project, default_mode=None)
        user.chown(user.home)
        env = {"HOME": str(user.home), "PATH": f"{user.bin}:/usr/bin:/bin"}
        await install_as(
            user, env, "claude-code", "--agent", agent_id, "--permission-mode", "default"
        )
        # Its MCP tools over HTTP, served as the human, reached with its token in place of
        # the stdio server install added (which runs as the agent's user, off the socket).
        mcp = await stack_mcp.enter_async_context(mcp_over_http(human.home, root / "mcp.log"))
        for argv in (
            ["mcp", "remove", "--scope", "user", "agentcomms"],
            ["mcp", "add", "--scope", "user", "--transport", "http", "agentcomms", mcp,
             "--header", f"Authorization: Bearer {MCP_TOKEN}"],
        ):  # fmt: skip
            done = await asyncio.to_thread(user.run, env, "claude", *argv)
            assert done.returncode == 0, done.stdout + done.stderr
        # Its hooks pointed at the door.
        variables = claude_env(user.home, model, {**env, "AGENTCOMMS_SOCKET": str(human.door)})
        await human.start_agent(user, variables, "claude")
        claude = ClaudePane(human.tmux, "agent:0.0", user.home, user.project, model)
        await claude.wait_for_screen(PROMPT_HINT, timeout=90)
        yield await human.registered(claude, user)


async def test_its_permission_request_reaches_the_humans_approvals_and_is_answered(
    setup: Setup,
) -> None:
    """The human's message is typed into its pane; the tool it then asks for waits on the
    human's approvals, and the human's answer runs it, as the agent's user."""
    approval = await own_file_asked(setup, bash("touch own.txt"), text("Own file made."))
    assert (approval["tool"], approval["input"]) == ("Bash", "touch own.txt")
    await own_file_made(setup, approval)
    await setup.pane.wait_for_screen(ALLOWED_BY_HOOK)


async def test_what_it_starts_cannot_approve_its_open_request_nor_read_the_humans_secrets(
    setup: Setup,
) -> None:
    def tries(command: str) -> Any:
        return tool("Bash", command=command, description="Try the doors", run_in_background=True)

    await doors_tried(setup, tries, bash("touch second.txt"), text("Second made."))


async def test_its_mcp_tools_reach_the_human_over_http_with_its_token(setup: Setup) -> None:
    claude, model = setup.pane, setup.pane.model
    await claude.wait_ready()
    words = "hello from an agent of its own user"
    model.on(
        "tell me over mcp",
        tool("mcp__agentcomms__send_message", provider="local", chat_id="local", message=words),
        text("Told you."),
    )
    await claude.type("tell me over mcp")
    asking = await eventually(setup.approval, timeout=60)  # an MCP tool asks too
    assert asking["tool"] == "mcp__agentcomms__send_message", asking
    assert (await cli(setup.human, "approve", asking["id"])).returncode == 0
    await claude.wait_for_screen("Told you.")

    async def received() -> list[dict[str, Any]] | None:
        done = await cli(setup.human, "inbox", "--json")
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)["messages"]
        return [r for r in rows if words in json.dumps(r)] or None

    (message,) = await eventually(received, timeout=30)
    assert setup.agent_id in json.dumps(message), message  # its token said who it is
