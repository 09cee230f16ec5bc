"""The real Claude Code, as a user has it: no permission mode written by the test harness, so
it would start in its own default, auto mode, where no approval reaches agentcomms. After
`agentcomms install claude-code --permission-mode default` it starts at its prompt in manual
mode (its one-time offer to switch back to auto not shown), and a tool that asks reaches the
human as an approval, answered from the terminal."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from agentcomms.cli.doctor_agents import claude_panes
from agentcomms.config import host_name
from agentcomms.models import Agent
from tests.fakes.anthropic import FakeAnthropic, bash, text
from tests.support.agents import AUTO_MODE_DIALOG, PROMPT_HINT, Attended, start_claude
from tests.support.cli import AGENTCOMMS, cli, cli_home, env_for
from tests.support.stack import register, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually


async def test_after_install_with_default_mode_claudes_approval_reaches_agentcomms(
    temporal_env: WorkflowEnvironment, tmux_socket_dir: Path, tmp_path: Path
) -> None:
    model = FakeAnthropic()
    tmux = Tmux(tmux_socket_dir / f"pm-{uuid.uuid4().hex[:8]}")

    def install(home: Path, project: Path) -> None:
        done = subprocess.run(
            [AGENTCOMMS, "install", "claude-code", "--permission-mode", "default"],
            env=env_for(tmp_path / "installer", HOME=str(home)),
            cwd=project,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "starts in default mode" in done.stdout, done.stdout

    async with running_stack(temporal_env.client, tmp_path / "stack") as stack, model.server:
        try:
            claude = await start_claude(
                tmux,
                tmp_path / "claude",
                model,
                setup=install,
                default_mode=None,  # as npm leaves it: nothing but what install writes
                skip_auto_dialog=False,  # and Claude's offer of auto mode not marked seen
                until=PROMPT_HINT,
                env={"AGENTCOMMS_SOCKET": str(stack.cfg.server.socket())},
            )
            await asyncio.sleep(1)
            assert AUTO_MODE_DIALOG not in claude.screen()
            # doctor finds this pane running Claude Code, and reads its directory's mode.
            pane = Agent(id="c", target=claude.target, tmux_socket=tmux.socket, host=host_name())
            assert await claude_panes([pane]) == [("c", claude.project)]
            agent_id = f"claude-{uuid.uuid4().hex[:6]}"
            await register(stack, agent_id, tmux, claude.target, submit_delay_ms=300)
            human = Attended(stack, claude, agent_id, cli_home(tmp_path, stack))

            model.on("make the manual file", bash("touch manual.txt"), text("Manual made."))
            await claude.type("make the manual file")
            approval = await eventually(human.approval, timeout=30)
            assert (approval["tool"], approval["input"]) == ("Bash", "touch manual.txt")

            done = await cli(human.home, "approve", approval["id"])
            assert done.returncode == 0, done.stderr
            await claude.wait_for_screen("Manual made.")
            assert (claude.project / "manual.txt").exists()
        finally:
            tmux.run("kill-server", check=False)
