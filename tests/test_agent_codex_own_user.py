"""The real Codex running as a Unix user of its own, set up as docs/agents/own-user.md says: a
user made for it (by this test, removed after), Codex's native executable where that user can
run it, agentcomms' hooks installed by that user with its agent id (in its own ``~/.codex``)
and trusted in Codex's own review, its pane in the human's tmux running it through `runuser`,
its hooks reaching agentcomms only through the hooks' own door. A message is typed into it; its
permission request (a command outside its sandbox, in ``on-request`` mode) reaches the human's
approvals and is answered there; and a process it starts can neither approve its open request
(on the door or with `agentcomms approve`) nor reach the human's socket, config, deployment key
or console token.

One Codex serves the module; its scripted model keeps every test's words."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.fakes.openai_responses import FakeResponses, Step, text, tool
from tests.support.agents import (
    AGENTS_PREFIX,
    CODEX_CATALOG_MODEL,
    CODEX_HOOKS_REVIEW,
    PROMPT_HINT,
    CodexPane,
    prepare_codex_home,
)
from tests.support.own_user import (
    OwnSetup,
    OwnUser,
    doors_tried,
    humans_stack,
    install_as,
    need,
    own_file_asked,
    own_file_made,
)

# Codex's own executable: the npm package's `codex` is a Node shim that runs it.
CODEX_NATIVE = "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
Setup = OwnSetup[CodexPane]


def escalated(command: str, **more: Any) -> Step:
    """Codex's shell tool running `command` outside its sandbox, which asks the human first."""
    return tool(
        "exec_command",
        cmd=command,
        sandbox_permissions="require_escalated",
        justification="to do what was asked",
        **more,
    )


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
    native = AGENTS_PREFIX / "node_modules" / CODEX_NATIVE
    if not native.exists():
        need(f"Codex's native executable is not at {native} (its npm layout changed)")
    user.link("codex", native)
    root = tmp_path_factory.mktemp("codex-own-user")
    model = FakeResponses()
    agent = {"target": "agent:0.0"}
    async with (
        model.server,
        humans_stack(open_folder, temporal_env.client, root, agent, tmux_socket_dir) as human,
    ):
        settings = {"approval_policy": "on-request", **CODEX_CATALOG_MODEL}
        prepare_codex_home(user.home, user.project, model, settings)
        user.chown(user.home)
        env = {"HOME": str(user.home), "PATH": f"{user.bin}:/usr/bin:/bin"}
        await install_as(user, env, "codex", "--agent", human.agent_id)
        variables = {
            **env,
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "SCRIPTED_OPENAI_KEY": "sk-test-agentcomms",
            "AGENTCOMMS_SOCKET": str(human.door),
        }
        # --no-daemon: no app-server of its own outlives the pane.
        await human.start_agent(user, variables, "codex --no-daemon")
        codex = CodexPane(human.tmux, "agent:0.0", user.home, user.project, model)
        await codex.wait_for_screen(CODEX_HOOKS_REVIEW, timeout=90)
        await codex.answer(CODEX_HOOKS_REVIEW, "2", "Enter")  # "Trust all and continue"
        await codex.wait_for_screen(PROMPT_HINT)
        yield await human.registered(codex, user)


async def test_a_message_typed_into_it_asks_the_human_and_the_answer_runs_it(
    setup: Setup,
) -> None:
    """The human's message is typed into its pane; the command it then asks to run outside its
    sandbox waits on the human's approvals, and the human's answer runs it, as the agent's
    user."""
    approval = await own_file_asked(setup, escalated("touch own.txt"), text("Own file made."))
    await own_file_made(setup, approval)


async def test_what_it_starts_cannot_approve_its_open_request_nor_read_the_humans_secrets(
    setup: Setup,
) -> None:
    """Codex keeps a command that outlasts its first wait running in its own session, and goes
    on: the tries run beside the next request."""

    def tries(command: str) -> Step:
        return escalated(command, yield_time_ms=500)

    await doors_tried(setup, tries, escalated("touch second.txt"), text("Second made."))
