"""The mailbox under volume: a backlog bigger than any Temporal payload, long text, the limits.

Everything goes through the gateway socket into a real dev server and a real tmux pane whose
bytes land in a file; what arrived is compared byte for byte with what was accepted.
"""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import MailboxConfig
from agentcomms.errors import GatewayError
from agentcomms.workflow_ids import mailbox_id
from gateway.socket.protocol import MAILBOX_FULL
from tests.support.stack import Stack, delivered, register, running_stack
from tests.support.tmux import SENT_HEADER, Tmux, as_sent, recorder
from tests.support.waiting import eventually, typed


def long_text(seed: int, chars: int) -> str:
    """`chars` characters of words and lines, different for every seed, with no final newline."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "      \n$`'\";"
    body = "".join(rng.choice(alphabet) for _ in range(chars - 9))
    return f"{seed:06d}: " + body.replace("\n\n", "\n ") + "."


async def reported_problems(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """What Temporal reports about the workflow's tasks failing (empty when all is well)."""
    fields = (await handle.describe()).raw_description.workflow_execution_info
    problems = fields.search_attributes.indexed_fields.get("TemporalReportedProblems")
    return [problems.data.decode()] if problems is not None else []


async def test_a_backlog_past_every_payload_limit_is_refused_at_its_limit_then_typed_whole(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    limit = stack.cfg.mailbox.max_pending_bytes
    texts = [long_text(i, 99_000) for i in range(110)]  # about 10.9 MB for an offline agent
    accepted: list[tuple[str, str]] = []
    refusals: list[str] = []
    for text in texts:
        try:
            result = await stack.call("send", agent_id=agent, message=text)
        except GatewayError as exc:
            assert exc.code == MAILBOX_FULL
            refusals.append(str(exc))
        else:
            accepted.append((result["event_id"], text))
    assert len(accepted) == limit // 99_000 and len(refusals) == len(texts) - len(accepted)
    assert f"{agent}'s mailbox is full: {len(accepted)} messages" in refusals[0]
    assert f"limit is {limit:,} bytes" in refusals[0] and "Nothing was queued" in refusals[0]
    refused_ids = {e.id for e in await stack.store.events_after(agent, None, 1000)} - {
        i for i, _ in accepted
    }
    assert not refused_ids  # a refused message left nothing behind

    handle = stack.client.get_workflow_handle(mailbox_id(agent))
    snapshot = await eventually(lambda: stack.gateway.mailbox.snapshot(agent))
    assert snapshot.pending == len(accepted)
    # The history passed the size at which Temporal asks for a new run: the texts left with it.
    runs = [w async for w in stack.client.list_workflows(f'WorkflowId = "{mailbox_id(agent)}"')]
    assert len(runs) >= 2

    target, out = recorder(tmux, tmp_path, "rec")
    await register(stack, agent, tmux, target, submit_delay_ms=0)
    expected = as_sent(*(text for _, text in accepted))
    await eventually(lambda: out.stat().st_size >= len(expected), timeout=90)
    assert out.read_bytes() == expected  # each whole, once, in order

    after = await stack.call("send", agent_id=agent, message="and one more", wait=True, timeout=30)
    assert after["delivered"] is True
    await typed(out, expected + as_sent("and one more"))
    events = await stack.store.events_after(agent, None, 1000)
    assert [e.id for e in events] == [i for i, _ in accepted] + [after["event_id"]]
    assert all(e.status == "delivered" and e.note is None for e in events)
    assert await reported_problems(handle) == []


async def test_a_long_message_is_typed_whole(stack: Stack, tmux: Tmux, tmp_path: Path) -> None:
    agent = stack.agent_id()
    target, out = recorder(tmux, tmp_path, "rec")
    await register(stack, agent, tmux, target, submit_delay_ms=0)
    text = long_text(7, 21_000)
    result = await stack.call("send", agent_id=agent, message=text, wait=True, timeout=30)
    assert result["delivered"] is True and "note" not in result
    await typed(out, as_sent(text))


async def test_max_chars_cuts_visibly_and_says_so(stack: Stack, tmux: Tmux, tmp_path: Path) -> None:
    agent = stack.agent_id()
    target, out = recorder(tmux, tmp_path, "rec")
    await register(stack, agent, tmux, target, submit_delay_ms=0, max_chars=1000)
    text = long_text(8, 3000).replace("\n", " ")
    result = await stack.call("send", agent_id=agent, message=text, wait=True, timeout=30)
    assert result["delivered"] is True
    await eventually(lambda: out.read_bytes().endswith(b"\r"))
    typed = out.read_bytes().decode()
    # The cap bounds the sender's words: the header comes on top.
    assert len(typed) == len(SENT_HEADER) + 1001 and typed.endswith(" chars]\r")
    assert typed.startswith(SENT_HEADER + text[:900])
    removed = 3000 - (1000 - len("… [truncated 2037 chars]"))
    assert f"[truncated {removed} chars]" in typed
    note = f"cut at the agent's max_chars (1,000): {removed:,} characters were not typed"
    assert result["note"] == note
    event = await eventually(lambda: delivered(stack, result["event_id"]))
    assert event.note == note
    listed = (await stack.call("events", agent_id=agent))["events"]
    assert listed[-1]["note"] == note


async def test_the_message_count_limit_refuses_but_interrupts_pass(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    mailbox = MailboxConfig(max_pending=3)
    async with running_stack(temporal_env.client, tmp_path, mailbox=mailbox) as stack:
        agent = stack.agent_id()
        for i in range(3):
            await stack.call("send", agent_id=agent, message=f"m{i}")
        with pytest.raises(GatewayError) as refused:
            await stack.call("send", agent_id=agent, message="one too many")
        assert refused.value.code == MAILBOX_FULL
        assert "3 messages (6 bytes) wait" in str(refused.value)
        assert "its limit is 3 messages" in str(refused.value)
        # Other agents have room of their own; an interrupt is never refused.
        await stack.call("send", agent_id=stack.agent_id("other"), message="fine")
        result = await stack.call("interrupt", agent_id=agent)
        assert result["status"] == "queued"
        snapshot = await eventually(lambda: stack.gateway.mailbox.snapshot(agent))
        assert snapshot.pending == 4  # three messages and the interrupt


async def test_a_mailbox_whose_tasks_keep_failing_is_shown_broken(stack: Stack) -> None:
    """Whoever reaches Temporal can start a mailbox with an input it cannot read: its tasks fail
    for good. `agents` and `status` say so instead of showing messages queued forever."""
    agent = stack.agent_id("garbled")
    await stack.client.start_workflow(
        "AgentWorkflow",
        {"agent_id": ["not", "a", "string"]},
        id=mailbox_id(agent),
        task_queue=f"agentcomms-host-{stack.host}",
    )

    async def listed_broken() -> dict[str, Any] | None:
        agents: list[dict[str, Any]] = (await stack.call("agents", include_offline=True))["agents"]
        return next((a for a in agents if a["id"] == agent and a["status"] == "broken"), None)

    row = await eventually(listed_broken, timeout=60, interval=0.5)
    assert "tasks keep failing (WorkflowTaskFailedCause" in row["last_error"]
    assert f"temporal workflow describe -w agent-{agent}" in row["last_error"]
    status = await stack.call("status")
    assert status["agents_broken"][agent] == row["last_error"]
    await stack.client.get_workflow_handle(mailbox_id(agent)).terminate("test over")


@pytest.mark.timeout(300)  # a loaded machine (CI beside other jobs) makes 200 mailboxes slow
async def test_hundreds_of_agents_register_list_and_each_get_their_message(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    """Many mailboxes at once (the benchmark takes this to 10,000): every one registers, is
    listed, and types its message exactly once."""
    target, out = recorder(tmux, tmp_path, "shared")
    agents = [stack.agent_id(f"many{i}") for i in range(200)]
    for agent in agents:
        await register(stack, agent, tmux, target, submit_delay_ms=0)

    async def all_online() -> bool:
        listed = (await stack.call("agents"))["agents"]
        return {a["id"] for a in listed if a["status"] == "online"} >= set(agents)

    await eventually(all_online, timeout=90, interval=0.5)
    for agent in agents:
        await stack.call("send", agent_id=agent, message=f"hello {agent}")
    expected = sorted(as_sent(f"hello {agent}")[:-1] for agent in agents)
    await eventually(lambda: out.read_bytes().count(b"\r") >= len(agents), timeout=90)
    assert sorted(out.read_bytes().split(b"\r")[:-1]) == expected
