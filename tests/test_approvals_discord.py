"""An approval in the agent's Discord channel, through the real discord.py: the request with
Allow / Allow for this session / Deny buttons (message components); a press arrives as an
interaction on the bot's gateway connection, is acknowledged within Discord's 3 s (the fake
refuses a later answer, as Discord does), decides the approval when an allowed sender pressed,
and the message is edited to say who answered, its buttons gone. A tick of a question that
takes several options is acknowledged as an update of the message, whose buttons show it, and
answered with no reply at all. A stranger's press, or an interaction that is not a press on the
bot's own message, changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.discord import FakeDiscord
from tests.support.chat import connected
from tests.support.hooks import SESSION_SUGGESTION, open_approval, open_question
from tests.support.stack import Stack, answered_by_this_process
from tests.support.waiting import eventually

DEFERRED_REPLY, DEFERRED_UPDATE, EPHEMERAL = 5, 6, 1 << 6


@pytest.fixture
async def stack(discord_stack: Stack) -> Stack:
    await connected(discord_stack, "discord")
    return discord_stack


def _buttons(message: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, what a press sends back, without the request's digest at its end)."""
    return [
        (b["label"], b["custom_id"].rsplit(":", 1)[0])
        for row in message.get("components", [])
        for b in row["components"]
    ]


async def _told(discord: FakeDiscord, interaction: dict[str, Any]) -> str:
    """What the presser alone was answered, once the deferred reply was written."""
    answers = await eventually(lambda: len(discord.answers_to(interaction)) == 2 or None)
    first, then = discord.answers_to(interaction)
    # Acknowledged first (deferred, only the presser sees it), then the answer written.
    assert (first["type"], first["flags"] & EPHEMERAL) == (DEFERRED_REPLY, EPHEMERAL)
    assert answers
    return str(then["content"])


async def _told_after_a_tick(discord: FakeDiscord, interaction: dict[str, Any]) -> str:
    """What the presser of a box alone was told when the buttons did not show their tick."""
    await eventually(lambda: len(discord.answers_to(interaction)) == 2 or None)
    first, then = discord.answers_to(interaction)
    # Acknowledged as an update of the message (nothing in the channel), then a private followup.
    assert (first["type"], then.get("followup")) == (DEFERRED_UPDATE, True)
    assert then["flags"] & EPHEMERAL
    return str(then["content"])


async def test_an_allowed_sender_answers_with_a_button(
    stack: Stack, discord: FakeDiscord, agent: str
) -> None:
    approval = await open_approval(stack, agent)
    message = await eventually(lambda: discord.request_for(approval))
    assert message["channel_id"] == str(discord.general)
    assert "asks to use Bash:\ntouch done.txt" in discord.rendered(message)
    assert _buttons(message) == [
        ("Allow", f"ap:{approval}:a"),
        ("Allow for this session", f"ap:{approval}:s"),
        ("Deny", f"ap:{approval}:d"),
    ]

    mallory = discord.human_presses(message, f"ap:{approval}:a", user_id=666, name="Mallory")
    assert "allowed senders" in await _told(discord, mallory)
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}

    alice = discord.human_presses(message, f"ap:{approval}:s")
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "updatedPermissions": [SESSION_SUGGESTION]}
    assert (waited["decided_by"], waited["decided_via"]) == ("Alice", "discord")
    assert f"{approval}: allowed for the session by Alice on Discord" in await _told(discord, alice)
    edited = await eventually(lambda: discord.edits or None)
    assert edited[0]["id"] == message["id"]
    assert f"{approval}: allowed for the session by Alice on Discord" in edited[0]["content"]
    assert _buttons(edited[0]) == []

    late = discord.human_presses(message, f"ap:{approval}:d")
    assert "was answered already" in await _told(discord, late)


async def test_an_interaction_not_on_the_bots_own_message_changes_nothing(
    stack: Stack, discord: FakeDiscord, agent: str
) -> None:
    approval = await open_approval(stack, agent)
    message = await eventually(lambda: discord.request_for(approval))
    # Meant for another application, or a press on a message the bot never posted.
    elsewhere = discord.human_presses(message, f"ap:{approval}:a", application_id=99)
    someone_elses = discord.human_says(discord.general, f"approval {approval}", user_id=777)
    not_ours = discord.human_presses(someone_elses, f"ap:{approval}:a")
    # A genuine press behind them is answered, so the two before it were handled by then.
    probe = discord.human_presses(message, "something-else")
    assert "not agentcomms'" in await _told(discord, probe)
    assert discord.answers_to(elsewhere) == [] and discord.answers_to(not_ours) == []
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}


async def test_an_answer_from_the_terminal_takes_the_buttons_away(
    stack: Stack, discord: FakeDiscord, agent: str
) -> None:
    approval = await open_approval(stack, agent)
    message = await eventually(lambda: discord.request_for(approval))
    await stack.call("approval_decide", id=approval, behavior="deny", by="bob", message="no")
    edited = await eventually(lambda: discord.edits or None)
    assert edited[0]["id"] == message["id"] and _buttons(edited[0]) == []
    assert (
        f"{approval}: denied by {answered_by_this_process()} on the command line"
        in edited[0]["content"]
    )


async def test_a_question_that_takes_several_options_is_ticked_then_done(
    stack: Stack, discord: FakeDiscord, agent: str
) -> None:
    approval = await open_question(stack, agent, ["lint", "tests", "docs"])
    message = await eventually(lambda: discord.request_for(approval))

    def labels() -> list[str]:
        shown = next(m for m in discord.sent if m["id"] == message["id"])
        return [label for label, _ in _buttons(shown)]

    assert labels() == ["☐ lint", "☐ tests", "☐ docs", "Done"]

    def press(data: str, *, user_id: int = 4242, name: str = "Alice") -> dict[str, Any]:
        return discord.human_presses(message, f"ap:{approval}:{data}", user_id=user_id, name=name)

    async def tick(data: str, shown: list[str]) -> dict[str, Any]:
        # One press at a time, each on the buttons as the last press left them.
        pressed = press(data)
        await eventually(lambda: labels() == shown or None)
        return pressed

    assert "tick at least one option" in await _told(discord, press("done"))
    ticks = [
        await tick("t2", ["☐ lint", "☑ tests", "☐ docs", "Done"]),
        await tick("t3", ["☐ lint", "☑ tests", "☑ docs", "Done"]),
    ]
    mallory = press("u3", user_id=666, name="Mallory")
    assert "allowed senders" in await _told_after_a_tick(discord, mallory)
    assert labels() == ["☐ lint", "☑ tests", "☑ docs", "Done"]
    ticks += [
        await tick("u2", ["☐ lint", "☐ tests", "☑ docs", "Done"]),
        await tick("t1", ["☑ lint", "☐ tests", "☑ docs", "Done"]),
    ]
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}

    assert "answered 'lint, docs' by Alice on Discord" in await _told(discord, press("done"))
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "answer": "lint, docs"}
    settled = await eventually(lambda: [e for e in discord.edits if "answered" in e["content"]])
    assert _buttons(settled[0]) == [] and labels() == []
    # Each tick was acknowledged as an update of the message and answered by its buttons
    # alone: no reply, private or not, for anyone to scroll past.
    for pressed in ticks:
        assert discord.answers_to(pressed) == [
            {"interaction": pressed["id"], "type": DEFERRED_UPDATE, "flags": 0}
        ]
    assert discord.count("POST /webhooks/{id}/{token}") == 1  # Mallory's refusal
