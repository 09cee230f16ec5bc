"""Only its agents' requests reach a phone: when `agents.ID.approvers` names who answers an
agent, a phone not listed there (phone:NUMBER, phone:local) neither hears nor answers that
agent's requests, whatever its PIN says of the caller. Tried as attacks: on the menu of a call
coming in (the local phone's dial, through the socket), an answer to a request it was never
offered, its id put in the step's query; on the ladder, a request of an agent that names other
approvers, whose call would say it to whoever picks up and take their key. An agent that names
no approvers is heard by every phone, as before."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import AgentConfig, Config
from agentcomms.escalation_models import Rung
from tests.support.hooks import listed_approval, open_approval
from tests.support.phone import Phone
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually

NOT_MINE = "That request is not this phone's to answer."


class Agents:
    """One agent whose approvers are a chat's sender alone, one that lists the local phone,
    and one that names none."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:8]
        self.theirs, self.mine, self.anyones = (f"{n}-{tag}" for n in ("theirs", "mine", "any"))

    def configure(self, cfg: Config, *, ladder: bool = False) -> Config:
        agents = {
            self.theirs: AgentConfig(target="nowhere:0.0", approvers=["telegram:456"]),
            self.mine: AgentConfig(target="nowhere:0.0", approvers=["phone:local"]),
        }
        update: dict[str, Any] = {"agents": agents}
        if ladder:  # the ladder's one rung: a call, at once
            update["escalation"] = [Rung(after_s=0, via="call")]
        return cfg.model_copy(update=update)


@pytest.fixture
def agents() -> Agents:
    return Agents()


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, agents: Agents
) -> AsyncIterator[Stack]:
    async with running_stack(temporal_env.client, tmp_path, configure=agents.configure) as s:
        yield s


@pytest.fixture
async def calling_stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, agents: Agents
) -> AsyncIterator[Stack]:
    def configure(cfg: Config) -> Config:
        return agents.configure(cfg, ladder=True)

    async with running_stack(temporal_env.client, tmp_path, configure=configure) as s:
        yield s


async def test_a_caller_hears_and_answers_only_the_requests_of_agents_it_approves_for(
    stack: Stack, agents: Agents
) -> None:
    theirs = await listed_approval(stack, await open_approval(stack, agents.theirs, command="a"))
    mine = await listed_approval(stack, await open_approval(stack, agents.mine, command="b"))
    anyones = await listed_approval(stack, await open_approval(stack, agents.anyones, command="c"))

    dialled = await stack.call("phone_dial")
    call = dialled["call"]
    assert "2 requests waiting for you" in dialled["words"]
    heard = [await stack.call("phone_dial_answer", call=call, step="menu", text="1")]
    heard.append(
        await stack.call(
            "phone_dial_answer", call=call, step="approval", query=heard[0]["query"], text="3"
        )
    )
    said = " ".join(h["words"] for h in heard)
    assert f"{agents.mine} asks to run: b." in said
    assert f"{agents.anyones} asks to run: c." in said
    assert agents.theirs not in said and "run: a." not in said

    # The attack: the request it was never offered, answered by its id in the step's query.
    forged = await stack.call(
        "phone_dial_answer", call=call, step="approval", query={"id": theirs}, text="1"
    )
    assert forged["words"].startswith(NOT_MINE)
    assert await stack.call("approval_wait", id=theirs, wait_s=0.2) == {"status": "open"}
    # What it may answer, it answers: the local phone is one of the approvers of `mine`.
    await stack.call("phone_dial_answer", call=call, step="approval", query={"id": mine}, text="2")
    await stack.call(
        "phone_dial_answer", call=call, step="approval", query={"id": anyones}, text="2"
    )
    for approval in (mine, anyones):
        waited = await stack.call("approval_wait", id=approval, wait_s=5)
        assert (waited["behavior"], waited["decided_by"]) == ("deny", "the local phone")
    assert await stack.call("approval_wait", id=theirs, wait_s=0.2) == {"status": "open"}


async def _first_rung(stack: Stack, approval: str) -> str:
    async def fired() -> str | None:
        traced = await stack.call("trace", event_id=approval)
        rungs = traced["rungs"]
        return str(rungs[0]["detail"]) if rungs else None

    return await eventually(fired, timeout=30)


async def test_the_ladder_rings_no_phone_that_is_not_the_agents_approver(
    calling_stack: Stack, agents: Agents
) -> None:
    stack = calling_stack
    phone = Phone(stack)
    theirs = await open_approval(stack, agents.theirs, command="rm -rf build", session=False)
    detail = await _first_rung(stack, theirs)
    assert detail == (
        f"skipped: the local phone is not one of {agents.theirs}'s approvers (add "
        f'"phone:local" to agents.{agents.theirs}.approvers for its requests to ring it)'
    )
    assert [line for line in await phone.lines(0.5) if line["agent_id"] == agents.theirs] == []

    # The same ladder for an agent that lists the local phone rings it, and takes its key.
    mine = await open_approval(stack, agents.mine, command="make", session=False)
    call_id = await phone.answer()
    asked = await phone.prompt(call_id)
    assert asked["approval_id"] == mine and f"{agents.mine} asks to run: make." in asked["say"]
    await phone.event(call_id, "heard", turn=asked["turn"], text="2")
    waited = await stack.call("approval_wait", id=mine, wait_s=10)
    assert (waited["behavior"], waited["decided_via"]) == ("deny", "call")
    assert await stack.call("approval_wait", id=theirs, wait_s=0.2) == {"status": "open"}
