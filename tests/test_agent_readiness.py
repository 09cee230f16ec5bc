"""Messages wait until the agent is ready, and nothing is typed into a dialog: a stand-in agent's
screen in a real tmux pane, its hooks through the hook command and the gateway's socket, a real
Temporal mailbox."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentcomms.agents.state import PERMISSION_PROMPT
from agentcomms.errors import GatewayError
from agentcomms.workflow_ids import mailbox_id
from gateway.agents.dialogs import EVERY_S
from tests.support.cli import AGENTCOMMS
from tests.support.fake_agent import (
    BUSY,
    DIALOG,
    PROMPT,
    RULE,
    FakeAgent,
    start_fake_agent,
    state_is,
    working,
)
from tests.support.mailbox import mailbox_replayer, record_histories, settled_history
from tests.support.stack import Stack
from tests.support.tmux import SENT_HEADER, Tmux, as_sent
from tests.support.waiting import eventually

# Long enough for a message that was going to be typed to have been (a delivery takes ms).
QUIET_S = 1.5


async def test_a_message_sent_mid_turn_waits_and_is_typed_after_stop(
    stack: Stack, ready_fake_agent: tuple[str, FakeAgent]
) -> None:
    agent_id, fake = ready_fake_agent
    busy = await working(stack, agent_id, fake, prompt="please run ls")
    assert busy["state_since"] is not None
    assert (await stack.call("status"))["agent_states"][agent_id] == "busy"

    sent = await stack.call("send", agent_id=agent_id, message="also check the tests")
    await asyncio.sleep(QUIET_S)
    assert fake.typed() == b""  # the agent is busy: the message waits
    traced = await stack.call("trace", event_id=sent["event_id"])
    assert any(f"waits because {agent_id} is busy since" in why for why in traced["why"]), traced

    await fake.showing(PROMPT)
    # Through the command the agent's settings run, JSON on stdin.
    await fake.hook_process("Stop", AGENTCOMMS, last_assistant_message="done")
    await eventually(lambda: fake.typed() == as_sent("also check the tests"))
    # Typed, the agent is busy with it until its own hooks say otherwise.
    await eventually(lambda: state_is(stack, agent_id, "busy"))


async def test_nothing_is_typed_into_a_permission_dialog(
    stack: Stack, ready_fake_agent: tuple[str, FakeAgent]
) -> None:
    agent_id, fake = ready_fake_agent
    await fake.hook("UserPromptSubmit", prompt="touch /tmp/x")
    await fake.showing(DIALOG)
    # Its hook waits for the human's answer through agentcomms (an approval), beside the dialog.
    asking = asyncio.create_task(
        fake.hook_process(
            "PermissionRequest",
            AGENTCOMMS,
            tool_name="Bash",
            tool_input={"command": "touch /tmp/x"},
        )
    )
    waiting = await eventually(lambda: state_is(stack, agent_id, "waiting"))
    assert waiting["waiting_for"] == "permission for Bash: touch /tmp/x"

    sent = await stack.call(
        "send", agent_id=agent_id, message="stop, do not run anything", wait=True, timeout=1
    )
    assert sent["delivered"] is False
    await asyncio.sleep(QUIET_S)
    assert fake.typed() == b""  # the dialog took no Enter: the tool was not approved

    # A hook that says "ready" while the dialog still shows (as SessionStart does under
    # Claude Code's first-start dialog) does not make the pane typed into: tmux looks first.
    await fake.hook("Stop")
    row = await eventually(lambda: state_is(stack, agent_id, "waiting"))
    assert row["waiting_for"] in ("a dialog in the pane", "permission for Bash: touch /tmp/x")
    await asyncio.sleep(QUIET_S)
    assert fake.typed() == b""

    # The human answers the dialog in the terminal; the turn ends.
    await fake.showing(PROMPT)
    await fake.hook("PostToolUse", tool_name="Bash", tool_input={"command": "touch /tmp/x"})
    await fake.hook("Stop")
    await eventually(lambda: fake.typed() == as_sent("stop, do not run anything"))
    # Answered in the terminal: the waiting hook ends with no decision of its own.
    await asyncio.wait_for(asking, timeout=30)

    # The mailbox's history with hooks and a pane that said no replays (and is kept, recorded).
    handle = stack.client.get_workflow_handle(mailbox_id(agent_id))
    history = await eventually(lambda: settled_history(handle))
    await handle.terminate("test over")
    result = await mailbox_replayer().replay_workflow(history)
    assert result.replay_failure is None
    record_histories([history], "agent-mailbox-readiness")


async def test_messages_that_waited_are_typed_as_one_prompt_oldest_first(
    stack: Stack, ready_fake_agent: tuple[str, FakeAgent]
) -> None:
    agent_id, fake = ready_fake_agent
    await working(stack, agent_id, fake)
    for text in ("first", "second", "third"):
        await stack.call("agent_message", from_agent_id="ops", to_agent_id=agent_id, message=text)
    await asyncio.sleep(QUIET_S)
    assert fake.typed() == b""

    await fake.showing(PROMPT)
    await fake.hook("Stop")
    expected = b"[from: ops] first\n[from: ops] second\n[from: ops] third\r"
    await eventually(lambda: fake.typed() == expected)
    await asyncio.sleep(QUIET_S)
    assert fake.typed() == expected  # one prompt, one Enter


async def test_an_interrupt_goes_at_once_while_the_agent_is_busy(
    stack: Stack, ready_fake_agent: tuple[str, FakeAgent]
) -> None:
    agent_id, fake = ready_fake_agent
    await working(stack, agent_id, fake)
    await stack.call("send", agent_id=agent_id, message="after the interrupt")
    await stack.call("interrupt", agent_id=agent_id)
    await eventually(lambda: fake.typed() == b"\x03")
    await asyncio.sleep(QUIET_S)
    assert fake.typed() == b"\x03"  # the message still waits for the turn to end


async def test_a_hook_from_a_pane_nobody_registered_is_refused(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    stranger = await start_fake_agent(tmux, tmp_path, stack.cfg.server.socket(), "stranger")
    with pytest.raises(
        GatewayError, match=f"no registered agent runs in tmux pane {stranger.pane_id}"
    ):
        await stack.call(
            "agent_hook",
            kind="claude-code",
            event="Stop",
            pane=stranger.pane_id,
            tmux_socket=tmux.socket,
            at_ns=1,
        )
    # The hook itself stays silent and succeeds: the agent must never notice.
    await stranger.hook("Stop")


async def test_a_turn_ended_by_esc_without_a_hook_is_noticed_from_the_pane(
    stack: Stack, ready_fake_agent: tuple[str, FakeAgent]
) -> None:
    agent_id, fake = ready_fake_agent
    await working(stack, agent_id, fake)
    await stack.call("send", agent_id=agent_id, message="are you there?")
    # The human pressed Esc: Claude Code is at its prompt again and sends no hook. Once the
    # state is older than STALE_AFTER, the pane decides, and it shows the prompt.
    await fake.showing("Interrupted · What should Claude do instead?\n\n" + PROMPT)
    await eventually(lambda: fake.typed() == as_sent("are you there?"), timeout=40)


async def test_a_dialog_no_hook_reported_shows_as_waiting_and_says_when_it_was_seen(
    stack: Stack, ready_fake_agent: tuple[str, FakeAgent]
) -> None:
    """Claude Code's own dialogs in auto mode run no hook: the state its last hook set (busy)
    is read off the pane once it is old, before `agents` shows it; and the pane's prompt after
    Esc shows as ready."""
    agent_id, fake = ready_fake_agent
    await working(stack, agent_id, fake)
    await fake.showing(DIALOG)

    async def seen(state: str) -> dict[str, object] | None:
        row = await state_is(stack, agent_id, state)
        return row if row is not None and row["confirmed_at"] else None

    row = await eventually(lambda: seen("waiting"), timeout=40)
    assert row["waiting_for"] == "a dialog on screen (answer it in the terminal)"
    assert row["state_since"] is None  # the hooks' "since" was of another state
    await fake.showing(PROMPT)
    await eventually(lambda: seen("ready"), timeout=20)


async def test_a_dialog_no_hook_reported_is_told_to_the_human_once_with_its_words(
    stack: Stack, ready_fake_agent: tuple[str, FakeAgent]
) -> None:
    """Claude Code in auto mode asks in its own dialog and runs no hook: the human is told on
    the agent's inbox line (and chats) what the dialog says and where to answer, once; a dialog
    after it is told again."""
    agent_id, fake = ready_fake_agent
    await working(stack, agent_id, fake)
    await fake.showing(DIALOG)

    async def notices() -> list[str]:
        events = await stack.store.latest_events(agent_id, 50)
        return [e.payload["text"] for e in events if e.payload.get("notice") == "dialog"]

    [told] = await eventually(notices, timeout=30)
    assert "no hook reported" in told and fake.target in told
    assert "Do you want to proceed?" in told and "--permission-mode default" in told
    await asyncio.sleep(QUIET_S + 3)  # further looks at the same dialog tell nothing more
    assert len(await notices()) == 1
    await fake.showing(BUSY)  # answered in the terminal: the turn goes on
    await asyncio.sleep(QUIET_S + 3)
    await fake.showing(DIALOG)

    async def told_again() -> bool | None:
        return True if len(await notices()) == 2 else None

    assert await eventually(told_again, timeout=30)


async def test_send_wait_reports_submitted_once_the_agents_prompt_carries_the_text(
    stack: Stack, ready_fake_agent: tuple[str, FakeAgent]
) -> None:
    agent_id, fake = ready_fake_agent
    sending = asyncio.create_task(
        stack.call("send", agent_id=agent_id, message="run the tests", wait=True, timeout=30)
    )
    await eventually(lambda: fake.typed() == as_sent("run the tests"))
    assert not sending.done()  # typed is not yet taken: the agent's prompt must carry it
    await fake.hook("UserPromptSubmit", prompt=f"{SENT_HEADER}run the tests")
    result = await sending
    assert (result["status"], result["delivered"]) == ("submitted", True)


# Claude Code's own question in auto mode, as it draws it under its rule (tests/screens has the
# whole screen of the real one).
OWN_DIALOG = (
    f"{RULE}\n Bash command\n Run a command\n touch /tmp/x\n\n Do you want to proceed?\n"
    " \u276f No\n   Yes\n\n Esc to cancel · Tab to amend"
)


async def test_claudes_own_question_is_an_approval_whose_keys_go_only_into_it(
    stack: Stack, ready_fake_agent: tuple[str, FakeAgent]
) -> None:
    """Read exactly, Claude Code's own "Do you want to proceed?" is an approval, not a notice,
    and its Notification hook (which says only that a dialog is open) leaves it so; when the
    pane shows another call by the time the human allows it, no key is pressed and the human is
    told to answer it in the terminal."""
    agent_id, fake = ready_fake_agent
    await working(stack, agent_id, fake)
    await fake.showing(OWN_DIALOG)

    async def opened() -> dict[str, Any] | None:
        listed = (await stack.call("approvals"))["approvals"]
        return next((a for a in listed if a["agent_id"] == agent_id), None)

    approval = await eventually(opened, timeout=30)
    assert (approval["tool"], approval["input"]) == ("Bash command", "Run a command\ntouch /tmp/x")
    await fake.hook("Notification", notification_type="permission_prompt")

    async def notified() -> bool | None:
        row = await stack.store.get_agent(agent_id)
        return True if row is not None and row.waiting_for == PERMISSION_PROMPT else None

    await eventually(notified)  # the pane is looked at again once that is 4 s old
    await asyncio.sleep(EVERY_S + 0.5)  # a look at the agent meanwhile leaves it open
    assert await opened() == approval
    await fake.showing(OWN_DIALOG.replace("/tmp/x", "/tmp/y"))
    await stack.call("approval_decide", id=approval["id"], behavior="allow")

    async def told() -> list[str] | None:
        events = await stack.store.latest_events(agent_id, 50)
        said = [e.payload["text"] for e in events if e.payload.get("notice") == "dialog"]
        return said or None

    [notice] = await eventually(told, timeout=30)
    assert f"dialog changed before the answer to approval {approval['id']}" in notice
    assert fake.typed() == b""
    # The call now on screen is asked in its turn.
    other = await eventually(opened, timeout=30)
    assert other["id"] != approval["id"] and other["input"].endswith("touch /tmp/y")
