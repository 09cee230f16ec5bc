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
from tests.fakes.openai_responses import FakeResponses, Step, text, tool
from tests.support.agents import (
    AGENTS_PREFIX,
    CODEX_CATALOG_MODEL,
    CODEX_HOOKS_REVIEW,
    PROMPT_HINT,
    CodexPane,
    prepare_codex_home,
)
from tests.support.cli import cli
from tests.support.own_user import (
    OwnUser,
    check_tries,
    human_home,
    need,
    open_approval,
    tries_command,
)
from tests.support.stack import Stack, register, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

# Codex's own executable: the npm package's `codex` is a Node shim that runs it.
CODEX_NATIVE = "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"


@dataclass
class Setup:
    stack: Stack
    codex: CodexPane
    agent_id: str
    user: OwnUser
    human: Path  # the human's agentcomms home: config, key, console token
    door: Path

    @property
    def model(self) -> FakeResponses:
        return self.codex.model

    async def approval(self) -> dict[str, Any] | None:
        return await open_approval(self.human, self.agent_id)


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
    door = open_folder / "hooks.sock"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTCOMMS_HOME", str(open_folder / "human"))
        human, agent_id = human_home(open_folder, {"target": "agent:0.0"})

        def configure(cfg: Config) -> Config:
            server = cfg.server.model_copy(update={"hooks_socket_path": door})
            return cfg.model_copy(update={"server": server})

        root = tmp_path_factory.mktemp("codex-own-user")
        model = FakeResponses()
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
            settings = {"approval_policy": "on-request", **CODEX_CATALOG_MODEL}
            prepare_codex_home(user.home, user.project, model, settings)
            user.chown(user.home)
            env = {"HOME": str(user.home), "PATH": f"{user.bin}:/usr/bin:/bin"}
            installed = await asyncio.to_thread(
                user.run, env, str(user.agentcomms), "install", "codex", "--agent", agent_id
            )
            assert installed.returncode == 0, installed.stdout + installed.stderr
            variables = {
                **env,
                "TERM": "xterm-256color",
                "LANG": "C.UTF-8",
                "SCRIPTED_OPENAI_KEY": "sk-test-agentcomms",
                "AGENTCOMMS_SOCKET": str(door),
            }
            # --no-daemon: no app-server of its own outlives the pane.
            command = user.pane_command(variables, "codex --no-daemon")
            try:
                await asyncio.to_thread(
                    tmux.run, "new-session", "-d", "-s", "agent", "-x", "200", "-y", "50", command
                )
                codex = CodexPane(tmux, "agent:0.0", user.home, user.project, model)
                await codex.wait_for_screen(CODEX_HOOKS_REVIEW, timeout=90)
                await codex.answer(CODEX_HOOKS_REVIEW, "2", "Enter")  # "Trust all and continue"
                await codex.wait_for_screen(PROMPT_HINT)
                await register(stack, agent_id, tmux, codex.target, submit_delay_ms=300)
                yield Setup(stack, codex, agent_id, user, human, door)
            finally:
                tmux.run("kill-server", check=False)


async def test_a_message_typed_into_it_asks_the_human_and_the_answer_runs_it(
    setup: Setup,
) -> None:
    """The human's message is typed into its pane; the command it then asks to run outside its
    sandbox waits on the human's approvals, and the human's answer runs it, as the agent's
    user."""
    codex, model = setup.codex, setup.model
    model.on("make the own file", escalated("touch own.txt"), text("Own file made."))
    sent = await setup.stack.call("send", agent_id=setup.agent_id, message="make the own file")
    assert sent["event_id"]
    approval = await eventually(setup.approval, timeout=60)
    print(f"listed: {approval}")
    assert "touch own.txt" in approval["input"]

    done = await cli(setup.human, "approve", approval["id"])
    assert done.returncode == 0, done.stderr
    await codex.wait_for_screen("Own file made.")
    made = codex.project / "own.txt"
    assert made.exists()
    assert made.owner() == setup.user.name
    traced = await setup.stack.call("trace", event_id=approval["id"])
    assert traced["status"].startswith("allowed by "), traced


async def test_what_it_starts_cannot_approve_its_open_request_nor_read_the_humans_secrets(
    setup: Setup,
) -> None:
    codex, model, out = setup.codex, setup.model, setup.user.out
    human_socket = setup.stack.cfg.server.socket()
    tries = tries_command(setup.user, setup.human, setup.door, human_socket)
    await codex.wait_for_screen(PROMPT_HINT)
    # Codex keeps a command that outlasts its first wait running in its own session, and goes
    # on: the tries run beside the next request.
    model.on(
        "try the human's doors",
        escalated(tries, yield_time_ms=500),
        escalated("touch second.txt"),
        text("Second made."),
    )
    await codex.type("try the human's doors")
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
        await codex.wait_for_screen("Second made.")
        traced = await setup.stack.call("trace", event_id=waiting["id"])
        assert traced["status"].startswith("allowed by "), traced
    finally:
        (out / "ask").unlink(missing_ok=True)
        (out / "tried.json").unlink(missing_ok=True)
