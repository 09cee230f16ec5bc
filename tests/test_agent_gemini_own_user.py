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

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config
from tests.fakes.gemini import FakeGemini, shell, text, tool
from tests.support.agents import (
    AGENTS_PREFIX,
    GEMINI_API_KEY,
    GEMINI_DIALOG,
    GeminiPane,
    prepare_gemini_home,
)
from tests.support.cli import cli
from tests.support.own_user import (
    OwnUser,
    check_tries,
    human_home,
    open_approval,
    tries_command,
)
from tests.support.stack import Stack, register, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

GEMINI_PACKAGE = AGENTS_PREFIX / "node_modules" / "@google" / "gemini-cli"


@dataclass
class Setup:
    stack: Stack
    gemini: GeminiPane
    agent_id: str
    user: OwnUser
    human: Path  # the human's agentcomms home: config, key, console token
    door: Path

    @property
    def model(self) -> FakeGemini:
        return self.gemini.model

    async def approval(self) -> dict[str, Any] | None:
        return await open_approval(self.human, self.agent_id)


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
    door = open_folder / "hooks.sock"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTCOMMS_HOME", str(open_folder / "human"))
        remote = {"approvals": {"remote": True}}
        # Only install reads approvals.remote: the human's config has no need of it.
        human, agent_id = human_home(open_folder, {"target": "agent:0.0"})

        def configure(cfg: Config) -> Config:
            server = cfg.server.model_copy(update={"hooks_socket_path": door})
            return cfg.model_copy(update={"server": server})

        root = tmp_path_factory.mktemp("gemini-own-user")
        model = FakeGemini()
        tmux = Tmux(tmux_socket_dir / f"u-{uuid.uuid4().hex[:8]}")
        async with (
            running_stack(
                temporal_env.client,
                root,
                socket_path=open_folder / "daemon.sock",
                configure=configure,
            ) as stack,
            model.server,
        ):
            prepare_gemini_home(user.home, user.project)
            # What install reads of the config, in the agent's user's own: yours is closed to it.
            own_config = user.home / ".agentcomms" / "config.json"
            own_config.parent.mkdir(mode=0o700)
            own_config.write_text(json.dumps({"agents": {agent_id: remote}}))
            own_config.chmod(0o600)
            user.chown(user.home)
            env = {"HOME": str(user.home), "PATH": f"{user.bin}:/usr/bin:/bin"}
            installed = await asyncio.to_thread(
                user.run, env, str(user.agentcomms), "install", "gemini", "--agent", agent_id
            )
            assert installed.returncode == 0, installed.stdout + installed.stderr
            assert f"has no agents.{agent_id}" not in installed.stdout, installed.stdout
            variables = {
                **env,
                "TERM": "xterm-256color",
                "LANG": "C.UTF-8",
                "GEMINI_API_KEY": GEMINI_API_KEY,
                "GOOGLE_GEMINI_BASE_URL": model.base_url,
                "AGENTCOMMS_SOCKET": str(door),
            }
            command = user.pane_command(variables, "gemini")
            try:
                await asyncio.to_thread(
                    tmux.run, "new-session", "-d", "-s", "agent", "-x", "200", "-y", "50", command
                )
                gemini = GeminiPane(tmux, "agent:0.0", user.home, user.project, model)
                await gemini.wait_ready(timeout=90)
                await register(stack, agent_id, tmux, gemini.target, submit_delay_ms=300)
                # Gemini queues prompts while its MCP servers start: one turn first.
                model.on("warm up", text("Warm."))
                await gemini.type("warm up")
                await gemini.wait_for_screen("Warm.", timeout=60)
                yield Setup(stack, gemini, agent_id, user, human, door)
            finally:
                tmux.run("kill-server", check=False)


async def test_a_message_typed_into_it_asks_the_human_and_the_answer_runs_it(
    setup: Setup,
) -> None:
    """The human's message is typed into its pane; the command it then runs waits on the
    human's approvals (Gemini's own dialog skipped), and the human's answer runs it, as the
    agent's user."""
    gemini, model = setup.gemini, setup.model
    await gemini.wait_ready()
    model.on("make the own file", shell("touch own.txt"), text("Own file made."))
    sent = await setup.stack.call("send", agent_id=setup.agent_id, message="make the own file")
    assert sent["event_id"]
    approval = await eventually(setup.approval, timeout=60)
    print(f"listed: {approval}")
    assert "touch own.txt" in approval["input"]
    assert GEMINI_DIALOG not in gemini.screen()

    done = await cli(setup.human, "approve", approval["id"])
    assert done.returncode == 0, done.stderr
    await gemini.wait_for_screen("Own file made.")
    made = gemini.project / "own.txt"
    assert made.exists()
    assert made.owner() == setup.user.name
    traced = await setup.stack.call("trace", event_id=approval["id"])
    assert traced["status"].startswith("allowed by "), traced


async def test_what_it_starts_cannot_approve_its_open_request_nor_read_the_humans_secrets(
    setup: Setup,
) -> None:
    gemini, model, out = setup.gemini, setup.model, setup.user.out
    human_socket = setup.stack.cfg.server.socket()
    tries = tries_command(setup.user, setup.human, setup.door, human_socket)
    await gemini.wait_ready()
    model.on(
        "try the human's doors",
        tool("run_shell_command", command=tries, description="Try", is_background=True),
        shell("touch second.txt"),
        text("Second made."),
    )
    await gemini.type("try the human's doors")
    trying = await eventually(setup.approval, timeout=60)
    assert "tries.py" in trying["input"], trying
    assert (await cli(setup.human, "approve", trying["id"])).returncode == 0

    async def second() -> dict[str, Any] | None:
        open_one = await setup.approval()
        return open_one if open_one and "second.txt" in open_one["input"] else None

    waiting = await eventually(second, timeout=60)
    (out / "ask").write_text(waiting["id"])
    try:
        await eventually(lambda: (out / "tried.json").exists(), timeout=60)
        tried = json.loads((out / "tried.json").read_text())
        print(f"tried: {tried}")
        check_tries(tried, setup.human)
        still = await setup.approval()  # nothing it tried answered it
        assert still is not None and still["id"] == waiting["id"]
        assert (await cli(setup.human, "approve", waiting["id"])).returncode == 0
        await gemini.wait_for_screen("Second made.")
        traced = await setup.stack.call("trace", event_id=waiting["id"])
        assert traced["status"].startswith("allowed by "), traced
    finally:
        (out / "ask").unlink(missing_ok=True)
        (out / "tried.json").unlink(missing_ok=True)
