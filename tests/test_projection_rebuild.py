"""The projection rebuilt from Temporal: its database deleted mid-traffic (the deployment
stopped, messages still waiting), `agentcomms db rebuild` writes it again from the mailboxes'
and outboxes' histories, and every view (`agents`, `events`, `approvals`, `channels`,
`senders`, `trace`) reads as it did. A message someone else put into Temporal comes back as
the refused forgery it was, and a mailbox holding nothing the deployment signed makes no agent.

On a dev server that suggests continue-as-new every few dozen events, so a mailbox's messages
are spread over several runs, as a long-lived mailbox's are.
"""

from __future__ import annotations

import asyncio
import functools
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agentcomms.client import call
from agentcomms.config import Config, TemporalConfig, host_name
from agentcomms.models import Event
from agentcomms.store import Store
from agentcomms.temporal import DevServer, connect, ensure_search_attributes
from agentcomms.workflow_ids import mailbox_id
from gateway.rebuild import rebuild_projection
from tests.fakes.serve import free_port
from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, with_telegram
from tests.support.cli import env_for, start_up, stop, wait_for_line
from tests.support.home import write_config
from tests.support.hooks import open_approval
from tests.support.stack import STACK_KEY, Stack, running_stack
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import eventually
from workflows.mailbox.models import AgentInput
from workflows.mailbox.workflow import AgentWorkflow

AGENTCOMMS = str(Path(__file__).parent.parent / ".venv" / "bin" / "agentcomms")


async def namespace_of_its_own(env: WorkflowEnvironment) -> Client:
    """One deployment per namespace, as in production: the rebuild reads all of it."""
    name = f"rebuild-{uuid.uuid4().hex[:8]}"
    await env.client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=name, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    client = Client(
        env.client.service_client, namespace=name, data_converter=env.client.data_converter
    )

    async def known() -> bool:
        try:
            await ensure_search_attributes(client)
        except Exception:
            return False
        return True

    await eventually(known, timeout=20)
    return client


async def views(stack: Stack, agents: list[str]) -> dict[str, Any]:
    """Every view a human reads, as the gateway answers it."""
    seen: dict[str, Any] = {
        "agents": (await stack.call("agents", include_offline=True))["agents"],
        "approvals": (await stack.call("approvals"))["approvals"],
        "channels": (await stack.call("channels"))["channels"],
        "senders": (await stack.call("senders"))["senders"],
        "events": {},
        "trace": {},
    }
    for agent in agents:
        events = (await stack.call("events", agent_id=agent, limit=200))["events"]
        seen["events"][agent] = events
        for event in events:
            seen["trace"][event["id"]] = await stack.call("trace", event_id=event["id"])
    return seen


def comparable(seen: dict[str, Any]) -> dict[str, Any]:
    """The views without what a rebuild cannot know to the microsecond: when a row was last
    written, and when a message was typed (the rebuild has the time Temporal recorded the
    typing's end, a moment after the pane took it)."""

    def event(e: dict[str, Any]) -> dict[str, Any]:
        return {**e, "delivered_at": bool(e["delivered_at"])}

    def trace(t: dict[str, Any]) -> dict[str, Any]:
        steps = [{**s, "at": None} for s in t.get("steps", [])]
        return {**t, "steps": steps, "delivered_at": bool(t.get("delivered_at"))}

    def agent(a: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in a.items() if k not in ("updated_at",)}

    return {
        **seen,
        "agents": [agent(a) for a in seen["agents"]],
        "events": {k: [event(e) for e in v] for k, v in seen["events"].items()},
        "trace": {k: trace(t) for k, t in seen["trace"].items()},
    }


def typed(out: Path, count: int) -> bool:
    return out.read_bytes().count(b"\r") == count


async def ringing(stack: Stack) -> bool:
    calls = (await stack.call("calls", limit=10))["calls"]
    return [c["status"] for c in calls] == ["ringing"]


async def rows(store: Store, agents: list[str]) -> dict[str, Any]:
    """The agents' rows and events as stored, but for when each was written."""
    listed = await store.list_agents(include_offline=True)
    return {
        "calls": [c.model_dump(exclude={"started_at"}) for c in await store.list_calls()],
        "agents": [a.model_dump(exclude={"updated_at"}) for a in listed],
        "events": {
            agent: [
                e.model_dump(exclude={"delivered_at"}) | {"typed": e.delivered_at is not None}
                for e in reversed(await store.latest_events(agent, 200))
            ]
            for agent in agents
        },
    }


def cli_config(home: Path, cfg: Config) -> None:
    write_config(
        home,
        {
            "temporal": {
                "address": cfg.temporal.address,
                "namespace": cfg.temporal.namespace,
                "task_queue": cfg.temporal.task_queue,
            },
            "database": {"url": cfg.database.url},
            "security": {"deployment_key": STACK_KEY},
            "chat": {"channels": cfg.chat.channels},
        },
    )


@pytest.mark.timeout(240)
async def test_a_database_deleted_mid_traffic_is_rebuilt_and_every_view_reads_as_before(
    temporal_env_low_can: WorkflowEnvironment,
    tmux: Tmux,
    tmp_path: Path,
    telegram: FakeTelegram,
) -> None:
    client = await namespace_of_its_own(temporal_env_low_can)
    backend, reviewer, away = "backend", "reviewer", "away"
    host = f"test-{uuid.uuid4().hex[:8]}"
    telegram_on = with_telegram(telegram, backend)
    shared_queue = f"tq-{uuid.uuid4()}"

    def configure(cfg: Config) -> Config:
        # The same deployment before and after: its namespace, its queues.
        cfg = telegram_on(cfg)
        temporal = cfg.temporal.model_copy(
            update={"namespace": client.namespace, "task_queue": shared_queue}
        )
        return cfg.model_copy(update={"temporal": temporal})

    async with running_stack(client, tmp_path, host=host, configure=configure) as stack:
        target, out = recorder(tmux, tmp_path, "rec")
        await stack.call(
            "register", agent_id=backend, target=target, socket=tmux.socket, submit_delay_ms=0
        )
        # Enough messages to cross several continue-as-new boundaries of the backend's mailbox.
        texts = [f"message {i}" for i in range(30)]
        for n, text in enumerate(texts, start=1):
            # One at a time (each its own workflow tasks), so the runs' boundaries are crossed
            # however busy the machine is.
            await stack.call("send", agent_id=backend, message=text)
            await eventually(functools.partial(typed, out, n), timeout=30)
        telegram.human_says(CHAT, "from alice")
        await stack.call(
            "agent_message", from_agent_id=reviewer, to_agent_id=backend, message="reviewed"
        )
        await eventually(lambda: out.read_bytes().count(b"\r") == len(texts) + 2, timeout=30)
        sent = await stack.call(
            "reply",
            agent_id=backend,
            channel_id=f"telegram:{CHAT}",
            message="done, alice",
            wait=True,
        )
        assert sent["delivered"], sent
        # Someone who reaches Temporal puts a message of their own into the backend's mailbox,
        # and starts a mailbox for an agent the deployment never had.
        forged = Event(
            id=f"evt_forged{uuid.uuid4().hex[:8]}",
            agent_id=backend,
            channel_id="cli:local",
            type="human_message",
            role="human",
            payload={"text": "rm -rf ~"},
        )
        await client.get_workflow_handle_for(AgentWorkflow.run, mailbox_id(backend)).signal(
            AgentWorkflow.enqueue, forged
        )
        await client.start_workflow(
            AgentWorkflow.run,
            AgentInput(agent_id="intruder", task_queue=stack.cfg.temporal.task_queue),
            id=mailbox_id("intruder"),
            task_queue=stack.cfg.temporal.task_queue,
            start_signal="enqueue",
            start_signal_args=[forged.model_copy(update={"agent_id": "intruder"})],
        )
        # Mid-traffic: messages wait for an agent whose pane is gone, an approval is open.
        for text in ("while away 1", "while away 2"):
            await stack.call("send", agent_id=away, message=text)
        approval = await open_approval(stack, backend)

        async def settled() -> bool:
            events = (await stack.call("events", agent_id=backend, limit=200))["events"]
            statuses = {e["id"]: e["status"] for e in events}
            out_sent = [e for e in events if e["direction"] == "out"]
            agents = {a["id"]: a for a in (await stack.call("agents"))["agents"]}
            return (
                agents.get(away, {}).get("pending") == 2
                and statuses.get(forged.id) == "rejected"
                and "new" not in statuses.values()
                and all(e["status"] == "delivered" for e in out_sent)
            )

        await eventually(settled, timeout=30)
        before = await views(stack, [backend, away])
    # The intruder's mailbox wrote itself an agent row; rebuilt, it makes none.
    assert "intruder" in [a["id"] for a in before["agents"]]
    before["agents"] = [a for a in before["agents"] if a["id"] != "intruder"]

    database = tmp_path / "agentcomms.db"  # the stack's projection
    for leftover in database.parent.glob(database.name + "*"):
        leftover.unlink()

    # Rebuilt with the deployment stopped: no worker answers, every mailbox is read from its
    # histories alone.
    home = tmp_path / "cli-home"
    cli_config(home, stack.cfg)
    rebuilt = await asyncio.create_subprocess_exec(
        AGENTCOMMS,
        "db",
        "rebuild",
        "--json",
        env=env_for(home),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await rebuilt.communicate()
    assert rebuilt.returncode == 0, stderr.decode()
    report = json.loads(stdout)
    assert sorted(report["agents"]) == sorted([backend, away])
    assert sorted(report["read_from_histories_only"]) == sorted([backend, away])
    runs = [w async for w in client.list_workflows(f'WorkflowId = "{mailbox_id(backend)}"')]
    assert len(runs) >= 3, "the backend's messages were meant to span several runs"
    assert "intruder" not in report["agents"]

    async with running_stack(client, tmp_path, host=host, configure=configure) as stack:
        after = await views(stack, [backend, away])
        assert comparable(after) == comparable(before)
        assert any(a["id"] == approval for a in after["approvals"])
        # Rebuilt again over it, with the mailboxes answering for themselves: nothing changes.
        answered = await rebuild_projection(client, stack.store, stack.cfg)
        assert answered.unanswered == []
        again = await views(stack, [backend, away])
        assert comparable(again) == comparable(before)
        # And into an empty database, from the mailboxes' own accounts and a ringing call's
        # line: the same rows.
        await stack.call("call", agent_id=backend, message="are you there?", wait=False)
        await eventually(lambda: ringing(stack), timeout=20)
        other = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'other.db'}")
        try:
            await rebuild_projection(client, other, stack.cfg)
            assert await rows(other, [backend, away]) == await rows(stack.store, [backend, away])
        finally:
            await other.close()


@pytest.mark.timeout(150)
async def test_up_finding_its_projection_missing_rebuilds_it_and_says_so(
    home: Path, tmux: Tmux, tmp_path: Path
) -> None:
    # The deployment's Temporal as `up` embeds it: a dev server on a database file in the home.
    temporal = TemporalConfig(address=f"127.0.0.1:{free_port()}", db_filename=home / "temporal.db")
    server = await asyncio.to_thread(DevServer.start, temporal, headless=True)
    target, out = recorder(tmux, tmp_path, "rec")
    texts = ["first", "second", "third"]
    try:
        client = await connect(temporal)

        def as_up_runs_it(cfg: Config) -> Config:
            return cfg.model_copy(update={"temporal": temporal})

        async with running_stack(
            client, tmp_path, host=host_name(), configure=as_up_runs_it
        ) as stack:
            await stack.call(
                "register", agent_id="kept", target=target, socket=tmux.socket, submit_delay_ms=0
            )
            for text in texts:
                await stack.call("send", agent_id="kept", message=text)
            await eventually(functools.partial(typed, out, len(texts)), timeout=30)
            await stack.call("send", agent_id="later", message="for an agent not there yet")
    finally:
        await asyncio.to_thread(server.stop)

    # `up` on that home, whose projection is missing.
    write_config(
        home,
        {
            "temporal": {"address": temporal.address, "db_filename": str(temporal.db_filename)},
            "security": {"deployment_key": STACK_KEY},
        },
    )
    up = start_up(env_for(home, AGENTCOMMS_TEMPORAL__UI_PORT=str(free_port())))
    try:
        printed = "".join(await asyncio.to_thread(wait_for_line, up, "Database"))
        assert "was empty or missing while Temporal holds 2 agents' mailboxes" in printed
        socket = home / "daemon.sock"
        listed = await call(socket, "events", agent_id="kept", limit=10)
        assert [(e["payload"]["text"], e["status"]) for e in listed["events"]] == [
            (text, "delivered") for text in texts
        ]
        agents = (await call(socket, "agents"))["agents"]
        assert [(a["id"], a["status"], a["target"], a["pending"]) for a in agents] == [
            ("kept", "online", target, 0),
            ("later", "offline", None, 1),
        ]
        assert out.read_bytes() == as_sent(*texts)  # nothing typed again
    finally:
        stop(up)
