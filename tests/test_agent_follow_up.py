"""A typed prompt that no UserPromptSubmit carried is followed up from the pane: still in the
agent's input box, Enter is pressed once more (once); gone without a hook, the hooks are missing.
A stand-in agent's screen in a real tmux pane, its hooks through the hook command, a real
Temporal mailbox."""

from __future__ import annotations

import asyncio

import pytest

from agentcomms.bridge.look import input_box
from agentcomms.workflow_ids import mailbox_id
from tests.support.fake_agent import (
    PROMPT,
    FakeAgent,
    state_is,
)
from tests.support.mailbox import (
    local_activities,
    mailbox_replayer,
    record_histories,
    settled_history,
)
from tests.support.stack import Stack
from tests.support.tmux import SENT_HEADER, as_sent
from tests.support.waiting import eventually

# Longer than a follow-up's wait (FOLLOW_UP_AFTER) and its look.
PAST_A_FOLLOW_UP_S = 4.5


@pytest.mark.timeout(90)
async def test_enter_is_pressed_once_more_when_the_text_stays_in_the_input_box(
    stack: Stack, ready_fake_agent: tuple[str, FakeAgent]
) -> None:
    agent_id, fake = ready_fake_agent
    sending = asyncio.create_task(
        stack.call("send", agent_id=agent_id, message="please run the tests", wait=True, timeout=60)
    )
    await eventually(lambda: fake.typed() == as_sent("please run the tests"))
    # The agent's screen keeps the text in its input box: its Enter was lost.
    await fake.showing(f"> {SENT_HEADER}please run the tests\n  ? for shortcuts")
    await eventually(lambda: fake.typed() == as_sent("please run the tests") + b"\r", timeout=15)
    assert "please run the tests" in fake.tmux.capture(fake.target)
    # Still there after a second look: no third Enter, ever.
    await asyncio.sleep(PAST_A_FOLLOW_UP_S)
    assert fake.typed() == as_sent("please run the tests") + b"\r"
    assert not sending.done()

    await fake.showing(PROMPT)
    await fake.hook("UserPromptSubmit", prompt=f"{SENT_HEADER}please run the tests")
    result = await sending
    assert (result["status"], result["delivered"]) == ("submitted", True)
    traced = await stack.call("trace", event_id=result["event_id"])
    assert [s["step"] for s in traced["steps"]][-2:] == ["typed", "submitted"], traced
    assert fake.typed() == as_sent("please run the tests") + b"\r"

    # The mailbox's history with its follow-ups replays (and is kept, recorded).
    handle = stack.client.get_workflow_handle(mailbox_id(agent_id))
    history = await eventually(lambda: settled_history(handle))
    await handle.terminate("test over")
    assert local_activities(history).count("follow_up_prompt") == 2
    result = await mailbox_replayer().replay_workflow(history)
    assert result.replay_failure is None
    record_histories([history], "agent-mailbox-follow-up")


@pytest.mark.timeout(90)
async def test_a_prompt_gone_without_a_hook_means_the_hooks_are_missing(
    stack: Stack, ready_fake_agent: tuple[str, FakeAgent]
) -> None:
    agent_id, fake = ready_fake_agent
    sent = await stack.call("send", agent_id=agent_id, message="hello there")
    await eventually(lambda: fake.typed() == as_sent("hello there"))
    assert input_box(fake.tmux.capture(fake.target)) == ""  # the input box is empty
    row = await eventually(lambda: state_is(stack, agent_id, "unknown"), timeout=15)
    assert row["waiting_for"] is None
    assert fake.typed() == as_sent("hello there")  # nothing pressed: the text left the box
    traced = await stack.call("trace", event_id=sent["event_id"])
    assert "submitted" not in [s["step"] for s in traced["steps"]]
    snapshot = await stack.call("agents")
    assert any(a["id"] == agent_id and a["state"] == "unknown" for a in snapshot["agents"])

    # The agent's hooks speak again: its state is known again, and a message is followed as before.
    await fake.hook("Stop")
    await eventually(lambda: state_is(stack, agent_id, "ready"))
