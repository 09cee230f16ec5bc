"""The durable mailbox end to end: gateway socket → AgentWorkflow → local activity → real tmux pane.

Panes are read back (capture-pane, or a raw recorder pane whose bytes land in a file), events are
read back from the projection, state from the workflow's query.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from agentcomms.ids import new_event_id
from agentcomms.models import Agent, Event
from agentcomms.search_attributes import AGENT_STATUS
from agentcomms.workflow_ids import mailbox_id
from tests.support.cli import AGENTCOMMS
from tests.support.events import message
from tests.support.fake_agent import registered
from tests.support.home import write_config
from tests.support.mailbox import Delivery, deliveries, local_activities
from tests.support.stack import STACK_KEY, Stack, delivered, recording_pane, register, running_stack
from tests.support.tmux import SENT_HEADER, Tmux, as_sent, recorder
from tests.support.waiting import eventually, typed
from workers.main import build_workers
from workflows.mailbox import queue
from workflows.mailbox.models import AgentSnapshot


async def test_send_is_typed_into_the_pane_and_recorded(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    target, out = recorder(tmux, tmp_path, "rec")
    await register(stack, agent, tmux, target, submit_delay_ms=0)
    result = await stack.call(
        "send", agent_id=agent, message="hello $HOME `x` 'q' \"dq\"", wait=True
    )
    assert result["delivered"] is True and result["status"] == "delivered"
    await typed(out, as_sent("hello $HOME `x` 'q' \"dq\""))
    event = await stack.store.get_event(result["event_id"])
    assert event is not None and event.status == "delivered" and event.delivered_at is not None
    assert event.channel_id == "cli:local" and event.payload["source"] == "cli"
    agent_row = await eventually(lambda: stack.store.get_agent(agent))
    assert agent_row.status == "online" and agent_row.target == target


async def test_a_sent_command_reaches_a_shell_pane_behind_its_header(
    stack: Stack, tmux: Tmux
) -> None:
    """Every message starts with its header, `agentcomms send` too: a shell in the pane reads
    the header as the command, so the text never runs as one typed alone."""
    agent = stack.agent_id()
    target = tmux.new_session("sh", "sh")
    await register(stack, agent, tmux, target)
    result = await stack.call("send", agent_id=agent, message="echo $((6*7))", wait=True)
    assert result["delivered"]
    await eventually(lambda: f"{SENT_HEADER}echo $((6*7))" in tmux.capture(target))
    await asyncio.sleep(0.3)
    assert "42" not in tmux.capture(target).splitlines()


async def test_hundreds_of_messages_arrive_once_in_order(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    out = await recording_pane(stack, agent, tmux, tmp_path)
    ids = [
        (await stack.call("send", agent_id=agent, message=f"m{i}"))["event_id"] for i in range(300)
    ]
    expected = as_sent(*(f"m{i}" for i in range(300)))
    await eventually(lambda: len(out.read_bytes()) >= len(expected), timeout=90)
    assert out.read_bytes().split(b"\r") == expected.split(b"\r")
    events = await stack.store.events_after(agent, None, 1000)
    assert [e.id for e in events] == ids
    await eventually(lambda: _all_delivered(stack, agent, 300))


async def _all_delivered(stack: Stack, agent: str, count: int) -> bool:
    events = await stack.store.events_after(agent, None, 1000)
    return len(events) == count and all(e.status == "delivered" for e in events)


async def _at_least(count: int, listing: Awaitable[list[str]]) -> list[str] | None:
    listed = await listing
    return listed if len(listed) >= count else None


async def backlog_then_pane(
    stack: Stack, tmux: Tmux, tmp_path: Path, count: int, *, submit_delay_ms: int
) -> tuple[str, Path]:
    """An agent with `count` messages ("b0", "b1"…) waiting, then registered on a recorder
    pane: the agent's id and the pane's file."""
    agent = stack.agent_id()
    for i in range(count):
        await stack.call("send", agent_id=agent, message=f"b{i}")
    target, out = recorder(tmux, tmp_path, "rec")
    await register(stack, agent, tmux, target, submit_delay_ms=submit_delay_ms)
    return agent, out


async def test_a_backlog_is_typed_several_messages_to_a_local_activity(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent, out = await backlog_then_pane(stack, tmux, tmp_path, 60, submit_delay_ms=0)
    expected = as_sent(*(f"b{i}" for i in range(60)))
    await eventually(lambda: out.read_bytes() == expected, timeout=30)
    await eventually(lambda: _all_delivered(stack, agent, 60))

    async def typing_so_far() -> list[str]:
        history = await stack.client.get_workflow_handle(mailbox_id(agent)).fetch_history()
        return [kind for kind in local_activities(history) if kind.startswith("deliver")]

    # The last batch writes its rows inside its activity: its marker may reach the history a
    # little after the rows show it delivered.
    typing = await eventually(lambda: _at_least(3, typing_so_far()))
    # Batches of about 500 ms of typing time: 25 messages of 20 ms each.
    assert typing[:3] == ["deliver_to_pane"] * 3, typing
    assert len(typing) <= 4, typing
    # `events` shows each message delivered once, in order.
    listed = (await stack.call("events", agent_id=agent, limit=100))["events"]
    assert [e["payload"]["text"] for e in listed if e["status"] == "delivered"] == [
        f"b{i}" for i in range(60)
    ]


async def test_a_burst_holds_its_workflow_task_for_the_messages_still_coming(
    stack: Stack, tmux: Tmux, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a burst, the messages sent while its batch's task is held join one next batch: one
    workflow task for several messages, not one each."""
    monkeypatch.setattr(queue, "BURST_HOLD_MS", 1000)  # long enough to send into under any load
    agent, out = await backlog_then_pane(stack, tmux, tmp_path, 2, submit_delay_ms=0)
    await eventually(lambda: out.read_bytes() == as_sent("b0", "b1"), interval=0.01)
    for i in range(3):
        await stack.call("send", agent_id=agent, message=f"f{i}")
    await eventually(lambda: out.read_bytes() == as_sent("b0", "b1", "f0", "f1", "f2"))

    async def both_batches() -> list[Delivery] | None:
        history = await stack.client.get_workflow_handle(mailbox_id(agent)).fetch_history()
        found = deliveries(history)
        return found if len(found) >= 2 else None

    burst, followers = (await eventually(both_batches))[:2]
    assert burst.answered == 2 and burst.summary.endswith("then hold 1000 ms for the burst")
    # Held 1 s, against milliseconds without a hold; the history's times are the server's
    # (task started, marker recorded), which can run a few tens of ms short of the hold itself.
    assert burst.seconds >= 0.9, burst
    assert followers.answered == 3, followers


async def test_messages_wait_for_an_unregistered_agent(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    for i in range(3):
        await stack.call("send", agent_id=agent, message=f"early {i}")
    snapshot = await eventually(lambda: stack.gateway.mailbox.snapshot(agent))
    assert snapshot.status == "offline" and snapshot.pending == 3
    out = await recording_pane(stack, agent, tmux, tmp_path)
    await eventually(lambda: out.read_bytes() == as_sent("early 0", "early 1", "early 2"))


async def test_an_interrupt_overtakes_queued_messages(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    for i in range(3):
        await stack.call("send", agent_id=agent, message=f"q{i}")
    await stack.call("register", agent_id=agent, target="nowhere:0.0", socket=tmux.socket)
    await stack.call("interrupt", agent_id=agent, reason="stop")
    out = await recording_pane(stack, agent, tmux, tmp_path, interrupt_key="C-c")
    await eventually(lambda: out.read_bytes() == b"\x03" + as_sent("q0", "q1", "q2"))


async def test_an_interrupt_not_pressed_within_its_lifetime_never_is(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    # Sent two minutes ago, while the agent had no pane (its host's worker down, say): pressed
    # now, it would stop whatever the agent does next.
    sent = datetime.now(UTC) - timedelta(minutes=2)
    old = message(agent, "cli:local", "", type="interrupt", role="system", created_at=sent)
    await stack.gateway.mailbox.post(old)
    await stack.call("send", agent_id=agent, message="after")
    out = await recording_pane(stack, agent, tmux, tmp_path, interrupt_key="C-c")
    await eventually(lambda: out.read_bytes() == as_sent("after"))

    async def failed() -> Event | None:
        row = await stack.store.get_event(old.id)
        return row if row is not None and row.status == "failed" else None

    row = await eventually(failed)
    assert row.error is not None and row.error.startswith("not pressed"), row.error
    assert out.read_bytes() == as_sent("after")  # and no C-c, ever


async def test_missing_pane_keeps_messages_until_it_appears(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    out = tmp_path / "late.bytes"
    out.touch()
    tmux.new_session("keep")  # a tmux server must exist; the agent's session does not yet
    await register(stack, agent, tmux, "late:0.0", submit_delay_ms=0)
    for i in range(3):
        await stack.call("send", agent_id=agent, message=f"late {i}")
    snapshot = await eventually(
        lambda: _snapshot_if(stack, agent, lambda s: s.status == "unreachable")
    )
    assert snapshot.pending == 3 and snapshot.unreachable_since is not None
    assert "late:0.0" in (snapshot.last_error or "")
    # `agentcomms agents` shows the agent unreachable with all three waiting.
    listed = await eventually(lambda: _listed_if(stack, agent, "unreachable", pending=3))
    assert "late:0.0" in listed["last_error"]
    assert listed["last_error"].startswith("no such pane")  # a sentence, no exception type name
    handle = stack.client.get_workflow_handle(mailbox_id(agent))
    # The UI filter says so too, once the workflow task that wrote the row has completed.
    await eventually(lambda: _indexed_is(handle, "unreachable"))
    tmux.new_session("late", f"stty raw -echo; exec cat >> {out}")
    await eventually(lambda: out.read_bytes() == as_sent("late 0", "late 1", "late 2"), timeout=40)
    await eventually(lambda: _agent_if(stack, agent, "online"))
    first = (await stack.store.events_after(agent, None, 1))[0]
    assert first.status == "delivered" and first.attempts >= 2  # failed tries are counted
    await eventually(lambda: _indexed_is(handle, "online"))
    for i in range(3):  # each one drains the queue again
        await stack.call("send", agent_id=agent, message=f"more {i}", wait=True)
    # The search attributes are written when the status changes, not at every retry or message.
    upserts = [
        e async for e in handle.fetch_history_events()
        if e.HasField("upsert_workflow_search_attributes_event_attributes")
        # Temporal records each patch as an upsert of its own attribute: not ours to count.
        and "AgentStatus" in e.upsert_workflow_search_attributes_event_attributes
        .search_attributes.indexed_fields
    ]  # fmt: skip
    # online at start (the registration started the mailbox), unreachable, online again
    assert len(upserts) == 3


async def _indexed_is(handle: WorkflowHandle[Any, Any], status: str) -> bool:
    description = await handle.describe()
    return description.typed_search_attributes.get(AGENT_STATUS) == status


async def _snapshot_if(
    stack: Stack, agent: str, cond: Callable[[AgentSnapshot], bool]
) -> AgentSnapshot | None:
    snapshot = await stack.gateway.mailbox.snapshot(agent)
    return snapshot if snapshot and cond(snapshot) else None


async def _listed_if(
    stack: Stack, agent: str, status: str, *, pending: int
) -> dict[str, Any] | None:
    listed = await stack.call("agents", include_offline=True)
    rows: list[dict[str, Any]] = [a for a in listed["agents"] if a["id"] == agent]
    ok = rows and rows[0]["status"] == status and rows[0]["pending"] == pending
    return rows[0] if ok else None


async def _agent_if(stack: Stack, agent: str, status: str) -> Agent | None:
    row = await stack.store.get_agent(agent)
    return row if row and row.status == status else None


async def test_reregistering_to_a_new_pane_delivers_there(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    first, first_out = recorder(tmux, tmp_path, "first")
    await register(stack, agent, tmux, first, submit_delay_ms=0)
    assert (await stack.call("send", agent_id=agent, message="one", wait=True))["delivered"]
    await typed(first_out, as_sent("one"))  # in the file before its program is killed
    tmux.kill_session("first")
    await stack.call("send", agent_id=agent, message="two")
    await eventually(lambda: _snapshot_if(stack, agent, lambda s: s.status == "unreachable"))
    second, second_out = recorder(tmux, tmp_path, "second")
    await register(stack, agent, tmux, second, submit_delay_ms=0)
    await eventually(lambda: second_out.read_bytes() == as_sent("two"))
    assert first_out.read_bytes() == as_sent("one")  # nothing more typed into the old pane


async def test_a_repeated_event_id_is_typed_once(stack: Stack, tmux: Tmux, tmp_path: Path) -> None:
    agent = stack.agent_id()
    out = await recording_pane(stack, agent, tmux, tmp_path)
    retried = new_event_id()  # a client that retries a send reuses its id
    first = await stack.call("send", agent_id=agent, message="once", event_id=retried, wait=True)
    again = await stack.call("send", agent_id=agent, message="once", event_id=retried)
    assert first["event_id"] == again["event_id"] == retried
    await stack.call("send", agent_id=agent, message="after", wait=True)
    await typed(out, as_sent("once", "after"))


async def test_agent_message_is_prefixed_with_its_sender(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    sender, receiver = stack.agent_id("frontend"), stack.agent_id("backend")
    out = await recording_pane(stack, receiver, tmux, tmp_path)
    result = await stack.call(
        "agent_message",
        from_agent_id=sender,
        to_agent_id=receiver,
        message="API is ready",
        wait=True,
    )
    assert result["delivered"] and result["to_agent_id"] == receiver
    await typed(out, f"[from: {sender}] API is ready\r".encode())
    event = await stack.store.get_event(result["event_id"])
    assert event is not None
    assert event.source_agent_id == sender and event.channel_id == f"agent:{sender}"
    assert event.type == "agent_message" and event.agent_id == receiver


async def test_unregister_keeps_messages_for_the_next_registration(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    target, out = recorder(tmux, tmp_path, "rec")
    await register(stack, agent, tmux, target, submit_delay_ms=0)
    assert (await stack.call("send", agent_id=agent, message="a", wait=True))["delivered"]
    await stack.call("unregister", agent_id=agent)
    await eventually(lambda: _listed_if(stack, agent, "offline", pending=0))
    queued = await stack.call("send", agent_id=agent, message="b", wait=True, timeout=1)
    assert queued == {"event_id": queued["event_id"], "delivered": False, "status": "queued"}
    await eventually(lambda: _listed_if(stack, agent, "offline", pending=1))
    assert out.read_bytes() == as_sent("a")
    await register(stack, agent, tmux, target, submit_delay_ms=0)
    await eventually(lambda: out.read_bytes() == as_sent("a", "b"))


async def test_events_page_forward_and_reply_reaches_the_inbox(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    await recording_pane(stack, agent, tmux, tmp_path)
    ids = [
        (await stack.call("send", agent_id=agent, message=f"e{i}", wait=True))["event_id"]
        for i in range(5)
    ]
    page = await stack.call("events", agent_id=agent, limit=2, since=ids[1])
    assert [e["id"] for e in page["events"]] == ids[2:4]
    tail = await stack.call("events", agent_id=agent, limit=2, tail=True)
    assert [e["id"] for e in tail["events"]] == ids[3:5]
    reply = await stack.call(
        "reply", channel_id="cli:local", message="done: tests pass", agent_id=agent
    )
    assert reply["delivered"] is True
    inbox = await stack.call("inbox")
    assert [(m["id"], m["payload"]["text"]) for m in inbox["messages"]][-1] == (
        reply["event_id"],
        "done: tests pass",
    )


async def test_an_agent_on_another_host_moves_its_mailbox_there(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    other = f"other-{stack.host}"
    agent = stack.agent_id()
    target, out = recorder(tmux, tmp_path, "rec")
    async with AsyncExitStack() as workers:
        for worker in build_workers(stack.client, stack.cfg, stack.store, host=other, shared=False):
            await workers.enter_async_context(worker)
        await register(stack, agent, tmux, target, submit_delay_ms=0, host=other)
        result = await stack.call("send", agent_id=agent, message="over there", wait=True)
        assert result["delivered"] and out.read_bytes() == as_sent("over there")
        description = await stack.client.get_workflow_handle(mailbox_id(agent)).describe()
        assert description.task_queue == f"agentcomms-host-{other}"


async def test_an_interrupt_overtakes_a_backlog_that_is_being_typed(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent, out = await backlog_then_pane(stack, tmux, tmp_path, 20, submit_delay_ms=100)
    await eventually(lambda: b"\r" in out.read_bytes())  # typing has begun
    await stack.call("interrupt", agent_id=agent)
    await eventually(lambda: b"\x03" in out.read_bytes(), timeout=30)
    typed_before = out.read_bytes().split(b"\x03")[0].count(b"\r")
    # Batches of ~500 ms of typing: 4 messages of 100 ms + 20 ms. Before batching: all 20.
    assert typed_before <= 8, typed_before
    await eventually(lambda: out.read_bytes().count(b"\r") == 20, timeout=30)


async def test_a_broken_projection_does_not_make_a_durable_send_look_lost(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    out = await recording_pane(stack, agent, tmux, tmp_path)
    # A mailbox started afresh asks the projection what its earlier runs obeyed and typed
    # before it obeys its registration (the one time it waits for the database): once the
    # registration shows, the projection is no longer needed to type.
    await eventually(lambda: registered(stack, agent))
    async with stack.store.engine.begin() as conn:  # every projection write now fails at once
        await conn.execute(text("ALTER TABLE events RENAME TO events_away"))
    result = await stack.call("send", agent_id=agent, message="still typed")
    assert result["event_id"].startswith("evt_") and result["status"] == "queued"
    await eventually(lambda: out.read_bytes() == as_sent("still typed"))
    async with stack.store.engine.begin() as conn:  # the database recovers: the row is written
        await conn.execute(text("ALTER TABLE events_away RENAME TO events"))
    row = await eventually(lambda: delivered(stack, result["event_id"]), timeout=30)
    assert row.payload["text"] == "still typed"


async def test_a_gateway_on_a_machine_without_a_worker_delivers_through_the_panes_host(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    """The gateway's machine runs no worker; the pane's host runs one. A mailbox starts on the
    shared queue (which that worker polls) and moves to the pane's host when registered there."""
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as stack:
        pane_host = f"box-{stack.agent_id('h')}"
        async with AsyncExitStack() as workers:
            for worker in build_workers(stack.client, stack.cfg, stack.store, host=pane_host):
                await workers.enter_async_context(worker)
            agent = stack.agent_id()
            await stack.call("send", agent_id=agent, message="waited for a pane")
            out = await recording_pane(stack, agent, tmux, tmp_path, host=pane_host)
            # Under load the mailbox's first run asks the projection what earlier runs did, then
            # moves to the pane's host, before it types: more than `send`'s default 10 s wait.
            result = await stack.call(
                "send", agent_id=agent, message="and this", wait=True, timeout=60
            )
            assert result["delivered"] is True
            await typed(out, as_sent("waited for a pane", "and this"))
            description = await stack.client.get_workflow_handle(mailbox_id(agent)).describe()
            assert description.task_queue == f"agentcomms-host-{pane_host}"


async def test_agentcomms_worker_with_a_host_id_types_for_that_host(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    """`agentcomms worker --host-id build-2`, a process of its own, types for the agents
    registered on build-2; the gateway's machine runs no worker at all."""
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as stack:
        home = tmp_path / "worker-home"
        cfg = stack.cfg
        write_config(
            home,
            {
                "temporal": {
                    "address": cfg.temporal.address,
                    "task_queue": cfg.temporal.task_queue,
                },
                "database": {"url": cfg.database.resolved_url()},
                # Hosts of one deployment share its key; with a key of its own, this worker
                # would refuse every message the gateway signed.
                "security": {"deployment_key": "${SHARED_DEPLOYMENT_KEY}"},
            },
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCOMMS_", "TMUX"))}
        env["SHARED_DEPLOYMENT_KEY"] = STACK_KEY
        host = f"build-{stack.agent_id('w')}"
        worker = await asyncio.create_subprocess_exec(
            AGENTCOMMS, "worker", "--host-id", host,
            env={**env, "AGENTCOMMS_HOME": str(home)},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        try:
            agent = stack.agent_id()
            out = await recording_pane(stack, agent, tmux, tmp_path, host=host)
            result = await stack.call("send", agent_id=agent, message="on build-2", wait=True)
            assert result["delivered"] is True
            await typed(out, as_sent("on build-2"))
        finally:
            worker.terminate()
            printed, _ = await worker.communicate()
        assert f"worker for host {host}" in printed.decode()
