"""The human's phone takes one call at a time, whoever places it, on a real Temporal and a real
projection: an agent's own call does not cut into a call in progress (a request's call, which
the human may be answering): it is not placed, not counted against the agent's budget, and the
agent is told the line is busy. A call the projection still shows up (its worker died before
writing its end) frees the phone as soon as Temporal says its workflow has closed; one whose
workflow is running, or not started yet, holds it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from ulid import ULID

from agentcomms.config import Config
from agentcomms.config.budget import Budget
from agentcomms.models import CallRecord, utcnow
from agentcomms.phone_line import claim_phone, held_since, workflow_closed
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from agentcomms.workflow_ids import CALL_WORKFLOW, call_workflow_id
from gateway.phone.calls import CallControl, CallParams, new_call_id
from gateway.phone.lines import LineReader

LOCAL = "local"  # the local phone: what a call's row names when no Twilio is set up


def _call_id() -> str:
    return f"c_{ULID()}"  # the Temporal server is the session's: ids never repeat


def _up(call_id: str, agent_id: str = "backend") -> CallRecord:
    return CallRecord(
        id=call_id, agent_id=agent_id, status="in-progress", phone_number=LOCAL, started_at=utcnow()
    )


async def _running(client: Client, call_id: str) -> WorkflowHandle[object, object]:
    """A call's workflow, open: started where no worker takes it, so it stays running."""
    return await client.start_workflow(
        CALL_WORKFLOW, id=call_workflow_id(call_id), task_queue=f"tq-{uuid.uuid4()}"
    )


async def _known(client: Client, call_id: str) -> bool:
    try:
        await client.get_workflow_handle(call_workflow_id(call_id)).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def test_a_call_shown_up_frees_the_phone_once_temporal_says_its_workflow_closed(
    store: Store, temporal_env: WorkflowEnvironment
) -> None:
    client = temporal_env.client
    cfg = Config()
    since = held_since(cfg.voice, utcnow())
    dead, live, unborn = _call_id(), _call_id(), _call_id()
    for call_id in (dead, unborn, live):  # the oldest first: the first to be found holding it
        await store.upsert_call(_up(call_id))
    await (await _running(client, dead)).terminate(reason="its worker died")
    live_run = await _running(client, live)
    assert await workflow_closed(client, dead)
    assert not await workflow_closed(client, live)
    # Claimed, its workflow about to start: Temporal does not know it yet, and it holds.
    assert not await workflow_closed(client, unborn)

    mine = CallRecord(id=_call_id(), agent_id="backend", status="dialing", phone_number=LOCAL,
                      started_at=utcnow())  # fmt: skip
    assert await claim_phone(store, client, mine, since=since) == unborn
    await store.upsert_call(_up(unborn).model_copy(update={"status": "completed"}))
    assert await claim_phone(store, client, mine, since=since) == live
    await live_run.terminate(reason="its worker died too")
    assert await claim_phone(store, client, mine, since=since) is None
    assert (await store.get_call(mine.id)) is not None  # the phone is its now


@pytest.fixture
def control(home: Path, store: Store, temporal_env: WorkflowEnvironment) -> CallControl:
    cfg, key = Config(budget=Budget(calls=1)), DeploymentKey(b"k" * 32)
    return CallControl(cfg, temporal_env.client, store, key, LineReader(temporal_env.client))


async def test_an_agents_call_while_the_phone_is_on_another_call_is_not_placed(
    control: CallControl, store: Store, temporal_env: WorkflowEnvironment
) -> None:
    client = temporal_env.client
    ladders = _call_id()  # a request's call, the human answering it
    await store.upsert_call(_up(ladders, "frontend"))
    ladder_run = await _running(client, ladders)

    busy = await control.call(CallParams(agent_id="backend", message="hello?", wait=False))
    print(f"the agent read: {busy}")
    assert (busy["status"], busy["success"]) == ("busy", False)
    assert "on another call" in (busy.get("note") or "")
    assert ladders not in str(busy)  # another agent's call is not this agent's to know
    assert not await _known(client, busy["call_id"])  # nothing rang
    assert await store.get_call(busy["call_id"]) is None

    await ladder_run.terminate(reason="the test is done with it")
    # The budget allows one call an hour: the busy one was not counted.
    placed = await control.call(CallParams(agent_id="backend", message="hello?", wait=False))
    assert placed["status"] == "ringing", placed
    try:
        assert await _known(client, placed["call_id"])
        # Its call holds the phone in turn: the next, an agent's or a ladder's, waits.
        again = await control.call(CallParams(agent_id="other", message="me too", wait=False))
        assert again["status"] == "busy", again
        rung = _up(_call_id(), "frontend").model_copy(update={"status": "dialing"})
        since = held_since(Config().voice, utcnow())
        assert await claim_phone(store, client, rung, since=since) == placed["call_id"]
    finally:
        handle = client.get_workflow_handle(call_workflow_id(placed["call_id"]))
        await handle.terminate(reason="the test is done with it")


async def test_a_call_whose_workflow_could_not_start_gives_the_phone_back(
    home: Path, store: Store, temporal_env: WorkflowEnvironment
) -> None:
    cfg = Config()
    nowhere = cfg.temporal.model_copy(update={"task_queue": ""})  # Temporal refuses it
    broken = cfg.model_copy(update={"temporal": nowhere})
    key, lines = DeploymentKey(b"k" * 32), LineReader(temporal_env.client)
    control = CallControl(broken, temporal_env.client, store, key, lines)

    with pytest.raises(RPCError):
        await control.call(CallParams(agent_id="backend", message="hi", request_id="r-1"))
    assert await store.get_call(new_call_id("backend", "r-1")) is None
    rung = _up(_call_id(), "frontend").model_copy(update={"status": "dialing"})
    since = held_since(cfg.voice, utcnow())
    assert await claim_phone(store, temporal_env.client, rung, since=since) is None
