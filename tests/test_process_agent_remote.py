"""A process agent on another host: its worker (`agentcomms worker --host-id`, its own home and
config, as a second machine runs it) starts the agent and drives it, and reaches the gateway only
through the gateway's socket as that machine sees it (forwarded, as `ssh -L` forwards it). Its
permission request is answered from a chat's button and its reply goes back to that chat."""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.acp.kinds import KINDS, located, portable
from agentcomms.cli.agents_cmd import _kind_command
from agentcomms.models import Agent
from agentcomms.workflow_ids import mailbox_id
from tests.fakes.telegram import FakeTelegram
from tests.support import acp_agent
from tests.support.acp_agent import log_of
from tests.support.chat import CHAT, connected, with_telegram
from tests.support.hosts import forwarded_socket, worker_log, worker_process
from tests.support.stack import running_stack
from tests.support.waiting import eventually

SCRIPTED = [sys.executable, acp_agent.__file__]


async def state_is(store: Any, agent: str, state: str) -> Agent | None:
    row = await store.get_agent(agent)
    return row if row is not None and row.state == state else None


@pytest.mark.timeout(180)
async def test_a_process_agent_on_another_host_asks_a_chat_and_its_reply_goes_back(
    temporal_env: WorkflowEnvironment, telegram: FakeTelegram, tmp_path: Path
) -> None:
    agent = f"far-{uuid.uuid4().hex[:8]}"
    work = tmp_path / "work"
    work.mkdir()
    # A Unix socket's path is short: the forwarded one lives in a folder of its own under /tmp.
    sockets = Path(tempfile.mkdtemp(prefix="ac-fwd-"))
    async with (
        running_stack(
            temporal_env.client, tmp_path / "stack", configure=with_telegram(telegram, agent)
        ) as stack,
        forwarded_socket(stack.cfg.server.socket(), sockets / "gateway.sock") as forwarded,
    ):
        host = f"far-{stack.agent_id('h')}"
        worker = await worker_process(
            stack,
            host,
            tmp_path / "home-far",
            "--no-shared",
            config={"server": {"socket_path": str(forwarded)}},
        )
        try:
            await connected(stack, "telegram")
            started = await stack.call(
                "start_agent", agent_id=agent, dir=str(work), command=SCRIPTED, host=host
            )
            assert started["host"] == host
            # Its mailbox moves to the far host at once, whose worker starts it there and keeps
            # its session in its own home, not the gateway's.
            await eventually(lambda: state_is(stack.store, agent, "ready"), timeout=60)
            described = await stack.client.get_workflow_handle(mailbox_id(agent)).describe()
            assert described.task_queue == f"agentcomms-host-{host}"
            assert (tmp_path / "home-far" / "acp" / f"{agent}.json").exists()
            assert not (stack.cfg.acp.state_root() / f"{agent}.json").exists()

            asked = telegram.human_says(
                CHAT, "acp:ask 3 touch far.txt\nacp:say Made it on the far host."
            )
            posted = await eventually(
                lambda: next((m for m in telegram.sent if "touch far.txt" in m["text"]), None),
                timeout=60,
            )
            buttons = [b for row in posted["reply_markup"]["inline_keyboard"] for b in row]
            assert [b["text"] for b in buttons][:3] == ["option 0", "option 1", "option 2"]
            try:
                await eventually(lambda: state_is(stack.store, agent, "waiting"))
            except AssertionError as exc:
                snapshot = await stack.gateway.mailbox.snapshot(agent)
                said = worker_log(tmp_path / "home-far").read_text()[-4000:]
                raise AssertionError(f"{exc}\nmailbox: {snapshot}\nfar worker:\n{said}") from None
            telegram.human_presses(posted, buttons[1]["callback_data"], user_id=CHAT)

            # The agent got the option the human pressed, its own id for it.
            await eventually(
                lambda: [e["chosen"] for e in log_of(work) if "permission" in e] == ["opt-1"],
                timeout=30,
            )
            reply = await eventually(
                lambda: next((m for m in telegram.sent if "far host" in m["text"]), None),
                timeout=30,
            )
            assert reply["text"] == "chose opt-1Made it on the far host."  # the chunks, whole
            assert reply["reply_to_message_id"] == asked["message"]["message_id"]
            await eventually(lambda: state_is(stack.store, agent, "ready"))
        finally:
            if worker.returncode is None:
                worker.terminate()
                await asyncio.wait_for(worker.wait(), 30)
            shutil.rmtree(sockets, ignore_errors=True)


def test_a_kind_on_another_host_is_its_programs_name_found_there(tmp_path: Path) -> None:
    # Started for another host, a kind names its program, never this machine's path to it.
    assert _kind_command("codex", "build-far-1") == portable("codex") == ["codex-acp"]
    assert portable("gemini") == ["gemini", "--acp"]
    # The far worker finds a bare known program in its own agents' prefix.
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / KINDS["codex"].program).touch()
    for command, runs in [
        (["codex-acp"], [str(bin_dir / "codex-acp")]),
        (["codex-acp", "--x"], [str(bin_dir / "codex-acp"), "--x"]),
        (["claude-agent-acp"], ["claude-agent-acp"]),  # not installed: as given, and it says so
        (["/opt/codex-acp"], ["/opt/codex-acp"]),  # a path is the operator's own
        (["my-agent", "--acp"], ["my-agent", "--acp"]),  # not a known kind's program
    ]:
        assert located(command, prefix=tmp_path) == runs, command
