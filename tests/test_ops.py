"""`trace` and `doctor` as a user runs them, while things break one at a time: a missing pane,
a stopped worker; then both mended. Real Temporal, real tmux, real SQLite, the CLI as a process."""

from __future__ import annotations

import json
import os
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, DatabaseConfig
from agentcomms.ids import new_event_id
from agentcomms.models import Event
from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, connected, with_telegram
from tests.support.cli import cli
from tests.support.home import cli_home
from tests.support.stack import Stack, running_stack
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import eventually, typed
from workers.main import build_workers


async def start_workers(stack: Stack) -> AsyncExitStack:
    workers = AsyncExitStack()
    for worker in build_workers(stack.client, stack.cfg, stack.store, host=stack.host):
        await workers.enter_async_context(worker)
    return workers


@pytest.mark.timeout(300)
async def test_trace_and_doctor_say_what_is_wrong_until_it_is_mended(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as stack:
        workers = await start_workers(stack)
        home = cli_home(tmp_path, stack)
        agent = stack.agent_id("backend")
        # Registered on a pane that does not exist yet.
        await stack.call(
            "register", agent_id=agent, target="rec:0.0", socket=tmux.socket, submit_delay_ms=0
        )
        event_id = (await stack.call("send", agent_id=agent, message="hello"))["event_id"]

        async def unreachable() -> bool:
            row = await stack.store.get_agent(agent)
            return row is not None and row.status == "unreachable"

        await eventually(unreachable)

        shown = await cli(home, "trace", event_id)
        assert shown.returncode == 0, shown.stderr
        out = shown.stdout
        assert "accepted" in out and "`agentcomms send`" in out
        assert f"by the gateway on {stack.host} (pid {os.getpid()})" in out, out
        assert f"in agent-{agent}, position 1 of 1" in out
        assert f"pane rec:0.0 on host {stack.host} is missing since" in out, out
        assert "try 1 failed: " in out and "rec" in out.partition("try 1 failed: ")[2], out
        assert f"workflow     agent-{agent}" in out
        assert f"/namespaces/default/workflows/agent-{agent}" in out

        doctor = await cli(home, "doctor")
        assert doctor.returncode == 1, doctor.stdout
        assert f"✗ agent {agent}: pane rec:0.0 on host {stack.host} is missing" in doctor.stdout
        assert f"✓ host {stack.host}: a worker polls" in doctor.stdout
        # No hook has reported for it: said, without failing (a shell pane has none).
        assert f"no hook has reported for {agent} (hooks missing?)" in doctor.stdout

        # The worker stops: doctor names the host whose agents have nobody to type for them.
        await workers.aclose()
        doctor = await cli(home, "doctor", "--json")
        assert doctor.returncode == 1
        report = json.loads(doctor.stdout)
        failed = {c["name"]: c for c in report["checks"] if not c["ok"]}
        assert f"worker {stack.host}" in failed, report
        assert (
            f"host {stack.host} has no worker for its agents {agent}"
            in (failed[f"worker {stack.host}"]["detail"])
        )
        assert "agentcomms worker" in failed[f"worker {stack.host}"]["fix"]
        traced = json.loads((await cli(home, "trace", event_id, "--json")).stdout)
        assert traced["status"] == "new"
        assert any("worker" in why for why in traced["why"]), traced

        # The pane is created and the worker comes back: typed, and all is well.
        _, recorded = recorder(tmux, tmp_path, "rec")
        workers = await start_workers(stack)
        try:

            async def delivered() -> dict[str, Any] | None:
                t = json.loads((await cli(home, "trace", event_id, "--json")).stdout)
                return t if t["status"] == "delivered" else None

            traced = await eventually(delivered, timeout=90, interval=1)
            await typed(recorded, as_sent("hello"))
            steps = {s["step"]: s for s in traced["steps"]}
            assert steps["typed"]["at"] == traced["delivered_at"] is not None
            # Each failed attempt is a step of its own, with its time and error, before the last.
            tries = [s for s in traced["steps"] if s["step"] == "try"]
            failed = traced["attempts"] - 1
            assert failed >= 1 and len(tries) == min(failed, 10), traced
            assert tries[-1]["detail"].startswith(f"try {failed} failed: "), tries
            assert all(t["at"] is not None for t in tries)
            assert steps["typed"]["detail"].endswith(f"on try {traced['attempts']}")
            assert f"into pane rec:0.0 on host {stack.host}" in steps["typed"]["detail"]
            assert traced["workflow_id"] == f"agent-{agent}"

            doctor = await cli(home, "doctor")
            assert doctor.returncode == 0, doctor.stdout
            assert "✗" not in doctor.stdout
        finally:
            await workers.aclose()


async def test_trace_of_an_unknown_id_is_one_line(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path) as stack:
        home = cli_home(tmp_path, stack)
        missing = new_event_id()
        traced = await cli(home, "trace", missing)
        assert traced.returncode == 1
        assert traced.stderr.strip() == (
            f"error: no event '{missing}'; `agentcomms events AGENT` lists an agent's event ids"
        )


async def test_trace_of_a_delivered_message_and_a_reply(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path) as stack:
        home = cli_home(tmp_path, stack)
        agent = stack.agent_id("front")
        target, out = recorder(tmux, tmp_path, "rec")
        await stack.call(
            "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
        )
        sent = await stack.call("send", agent_id=agent, message="hi", wait=True)
        assert sent["delivered"]
        await typed(out, as_sent("hi"))
        traced = json.loads((await cli(home, "trace", sent["event_id"], "--json")).stdout)
        assert [s["step"] for s in traced["steps"]] == ["accepted", "queued", "typed"]
        assert traced["why"] == []
        reply = await stack.call("reply", channel_id="cli:local", message="done", agent_id=agent)
        traced = json.loads((await cli(home, "trace", reply["event_id"], "--json")).stdout)
        assert traced["direction"] == "out" and traced["status"] == "delivered"
        assert [s["step"] for s in traced["steps"]] == ["accepted", "delivered"]


async def trace_json(home: Path, event_id: str) -> dict[str, Any]:
    run = await cli(home, "trace", event_id, "--json")
    assert run.returncode == 0, run.stderr
    # A Bot API URL holds the bot's token; what the provider answered may quote one.
    assert FakeTelegram().token not in run.stdout, run.stdout
    traced: dict[str, Any] = json.loads(run.stdout)
    return traced


def tries_of(traced: dict[str, Any]) -> list[str]:
    return [s["detail"] for s in traced["steps"] if s["step"] == "try"]


@pytest.mark.timeout(240)
async def test_trace_shows_each_send_try_and_the_providers_answer(
    temporal_env: WorkflowEnvironment, tmp_path: Path, database_url: str, telegram: FakeTelegram
) -> None:
    agent = f"backend-{uuid4().hex[:8]}"
    telegram_on = with_telegram(telegram, agent)

    def configure(cfg: Config) -> Config:
        return telegram_on(cfg).model_copy(update={"database": DatabaseConfig(url=database_url)})

    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        home = cli_home(tmp_path, stack)
        await connected(stack, "telegram")
        telegram.known_chats.add(CHAT)
        # A proxy before the Bot API may quote the URL it was asked for, token and all. The
        # flood wait holds the third try back long enough to ask while it still fails.
        quoted = f"Bad Gateway: {telegram.base_url}/bot{telegram.token}/sendMessage"
        telegram.fail_next("sendMessage", 500, 429, retry_after=8, description=quoted)
        reply = await stack.call(
            "reply", channel_id=f"telegram:{CHAT}", message="done", agent_id=agent, timeout=1
        )
        assert reply["status"] == "queued", reply
        event_id = reply["event_id"]

        async def tried_twice() -> Event | None:
            event = await stack.store.get_event(event_id)
            return event if event is not None and len(event.tries) == 2 else None

        await eventually(tried_twice, timeout=30)
        answers = [
            f"Telegram did not answer: Bad Gateway: {telegram.base_url}/bot***/sendMessage",
            "Telegram: Flood control exceeded. Retry in 8 seconds",
        ]
        traced = await trace_json(home, event_id)
        assert traced["status"] == "new", traced
        assert tries_of(traced) == [f"try {n} failed: {a}" for n, a in enumerate(answers, 1)]
        tried = [s for s in traced["steps"] if s["step"] == "try"]
        assert tried[0]["at"] is not None and tried[0]["at"] < tried[1]["at"], tried
        waiting = traced["steps"][-1]
        assert waiting["step"] == "send attempts", traced
        assert waiting["detail"].startswith("2 failed so far; telegram last answered: ")
        assert "; try 3 at " in waiting["detail"], waiting

        async def sent() -> dict[str, Any] | None:
            t = await trace_json(home, event_id)
            return t if t["status"] == "delivered" else None

        traced = await eventually(sent, timeout=60, interval=1)
        assert telegram.texts_to(CHAT) == ["done"]
        assert [s["step"] for s in traced["steps"]] == [
            "accepted",
            "queued",
            "try",
            "try",
            "sent",
        ]
        assert tries_of(traced) == [f"try {n} failed: {a}" for n, a in enumerate(answers, 1)]
        assert traced["attempts"] == 3
        assert traced["steps"][-1]["detail"].endswith("(try 3)"), traced
        assert traced["steps"][-1]["at"] == traced["delivered_at"] is not None

        # Refused after a try that failed: that try, then the refusal with its time.
        telegram.fail_next("sendMessage", 500)
        refused = await stack.call(
            "reply", channel_id="telegram:555", message="hi", agent_id=agent, timeout=30
        )
        assert refused["status"] == "failed", refused
        traced = await trace_json(home, refused["event_id"])
        assert [s["step"] for s in traced["steps"]] == ["accepted", "queued", "try", "failed"]
        assert tries_of(traced) == ["try 1 failed: Telegram did not answer: Internal Server Error"]
        failed = traced["steps"][-1]
        assert "does not know chat 555" in failed["detail"], failed
        assert failed["detail"].endswith("(try 2)") and failed["at"] is not None, failed
