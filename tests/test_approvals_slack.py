"""An approval in the agent's Slack channel, through the real slack_sdk: the request shown as
plain text with Block Kit buttons; a press arrives as an ``interactive`` envelope over Socket
Mode, is acknowledged at once, and decides the approval only when the presser may answer it (an
allowed sender, one of the agent's approvers, in a channel of the agent); the message is then
updated in place to say who answered, its buttons gone, its thread told how it ended, and the
first answer wins. Each approval is a thread of its own: a long plan's start and buttons in the
channel, the rest in the thread. A question
that takes several options is ticked in its own buttons. One stack for the module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import AgentConfig, Config
from gateway.approvals.chat_posts import CONTINUED
from tests.fakes.slack import ALICE, FakeSlack, buttons, rendered
from tests.support.chat import connected, with_slack
from tests.support.hooks import SESSION_SUGGESTION, open_approval, open_question
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually

AGENT = "slack-approvals"
BOB = "U0BOB"  # allowed to write to the agent, not one of its approvers
MALLORY = "U0MALLORY"  # allowed nothing


@pytest.fixture(scope="module")
async def slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory, slack: FakeSlack
) -> AsyncIterator[Stack]:
    def configure(cfg: Config) -> Config:
        cfg = with_slack(slack, AGENT)(cfg)
        chat = cfg.chat.model_copy(update={"allowed_senders": {"slack": [ALICE, BOB]}})
        approver = AgentConfig(target="nowhere:0.0", approvers=[f"slack:{ALICE}"])
        return cfg.model_copy(update={"chat": chat, "agents": {AGENT: approver}})

    tmp = tmp_path_factory.mktemp("slack-approvals")
    async with running_stack(temporal_env.client, tmp, configure=configure) as s:
        await connected(s, "slack")
        yield s


def _shown(slack: FakeSlack, message: dict[str, Any]) -> dict[str, Any]:
    """`message` as it is now (updated in place)."""
    return next(m for m in slack.sent if m["ts"] == message["ts"])


def _labels(slack: FakeSlack, message: dict[str, Any]) -> list[str]:
    return [label for label, _ in buttons(_shown(slack, message))]


async def _told(slack: FakeSlack, user: str, before: int) -> str:
    """What `user` alone was told (an ephemeral message) after `before` of them."""
    told = await eventually(lambda: [e for e in slack.ephemerals[before:] if e["user"] == user])
    return str(told[0]["text"])


async def _press(
    slack: FakeSlack, message: dict[str, Any], value: str, user: str = ALICE, **kw: Any
) -> str:
    before = len(slack.ephemerals)
    slack.human_presses(_shown(slack, message), value, user=user, name=user.lower(), **kw)
    return await _told(slack, user, before)


async def test_only_an_approver_in_the_agents_channel_decides_and_the_message_is_updated_in_place(
    stack: Stack, slack: FakeSlack
) -> None:
    approval = await open_approval(stack, AGENT)
    message = await eventually(lambda: slack.request_for(approval))
    assert message["channel"] == slack.general
    assert "asks to use Bash:\ntouch done.txt" in rendered(message)
    # Shown as plain text, never read as Slack's markup.
    assert {b["text"]["type"] for b in message["blocks"] if b["type"] == "section"} == {
        "plain_text"
    }
    values = dict(buttons(message))
    assert list(values) == ["Allow", "Allow for this session", "Deny"]
    assert values["Allow"].startswith(f"ap:{approval}:a:")

    refused = f"Only the agent's approvers may answer {approval}: nothing changed."
    told = await _press(slack, message, values["Allow"], MALLORY)
    assert "Only the agent's allowed senders may answer this" in told
    assert await _press(slack, message, values["Allow"], BOB) == refused
    # Alice's press, as if from a channel that is not the agent's.
    elsewhere = slack.dm_channel()
    forged = slack.press(message, values["Allow"])
    forged["channel"]["id"] = elsewhere
    before = len(slack.ephemerals)
    slack.push("interactive", forged)
    assert await _told(slack, ALICE, before) == refused
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}
    events = await stack.store.events_after(AGENT, None, 50)
    reasons = {e.error for e in events if e.type == "system" and e.status == "rejected"}
    assert reasons >= {
        f"slack:{BOB} is not one of {AGENT}'s approvers",
        f"slack:{elsewhere} is not a chat of {AGENT}",
        f"sender slack:{MALLORY} is not allowed",
    }

    told = await _press(slack, message, values["Allow for this session"])
    assert f"{approval}: allowed for the session by u0alice on Slack" in told
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "updatedPermissions": [SESSION_SUGGESTION]}
    assert waited["decided_via"] == "slack"
    updated = await eventually(lambda: [u for u in slack.updates if u["ts"] == message["ts"]])
    assert "allowed for the session by u0alice on Slack" in rendered(updated[-1])
    assert buttons(updated[-1]) == []
    # The approval's thread is told how it ended, once.
    ended = f"{approval} ({AGENT}, Bash): allowed for the session by u0alice on Slack"
    assert await eventually(lambda: _thread(slack, message)) == [ended]

    late = await _press(slack, message, values["Deny"])  # a button still on someone's screen
    assert "was answered already" in late
    assert _thread(slack, message) == [ended]


def _thread(slack: FakeSlack, root: dict[str, Any]) -> list[str]:
    """What was said in `root`'s thread, in order."""
    return [m["text"] for m in slack.sent if m.get("thread_ts") == root["ts"]]


async def test_a_long_plan_is_a_thread_of_its_own_its_start_and_buttons_in_the_channel(
    stack: Stack, slack: FakeSlack
) -> None:
    plan = "# Plan\n" + "\n".join(
        f"{n}. Move module {n} behind the new interface." for n in range(200)
    )
    opened = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id=AGENT,
        tool_name="ExitPlanMode",
        tool_input={"plan": plan},
    )
    approval = opened["id"]
    root = await eventually(lambda: slack.request_for(approval))
    assert "thread_ts" not in root and buttons(root)
    start = rendered(root).split(f"\n\n{CONTINUED}\n\n")[0]
    rest = await eventually(lambda: "".join(_thread(slack, root)).endswith("interface.") or None)
    assert rest
    shown = start + "".join(escaped_back(t) for t in _thread(slack, root))
    assert shown == f"{AGENT} asks to carry out its plan:\n{plan}"
    # Only its first message is in the channel: the rest never came between others' words.
    assert [m for m in slack.sent if approval in rendered(m) and "thread_ts" not in m] == [root]
    await stack.call("approval_decide", id=approval, behavior="deny", by="bob", message="no")
    said = f"{approval} ({AGENT}, ExitPlanMode): sent back to planning by"
    await eventually(lambda: _thread(slack, root)[-1].startswith(said) or None)


def escaped_back(text: str) -> str:
    """A message's text as the person wrote it (the app escapes Slack's three marks)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


async def test_a_press_on_a_message_that_is_not_the_apps_changes_nothing(
    stack: Stack, slack: FakeSlack
) -> None:
    approval = await open_approval(stack, AGENT, command="touch other.txt")
    message = await eventually(lambda: slack.request_for(approval))
    allow = dict(buttons(message))["Allow"]
    someone_elses = {**message, "user": "U0OTHERAPP", "bot_id": "B0OTHER"}
    before = len(slack.ephemerals)
    slack.human_presses(someone_elses, allow)
    probe = await _press(slack, message, "something-else")  # handled after the one before
    assert "not agentcomms'" in probe
    assert [e for e in slack.ephemerals[before:] if "not agentcomms'" not in e["text"]] == []
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}
    await stack.call("approval_decide", id=approval, behavior="deny", by="bob", message="no")
    updated = await eventually(lambda: [u for u in slack.updates if u["ts"] == message["ts"]])
    assert buttons(updated[-1]) == [] and "denied by" in rendered(updated[-1])


async def test_a_question_that_takes_several_options_is_ticked_in_its_buttons_then_done(
    stack: Stack, slack: FakeSlack
) -> None:
    approval = await open_question(stack, AGENT, ["lint", "tests", "docs"])
    message = await eventually(lambda: slack.request_for(approval))
    assert _labels(slack, message) == ["☐ lint", "☐ tests", "☐ docs", "Done"]

    async def tick(label: str, shown: list[str]) -> None:
        before = len(slack.ephemerals)
        value = dict(buttons(_shown(slack, message)))[label]
        slack.human_presses(_shown(slack, message), value)
        await eventually(lambda: _labels(slack, message) == shown or None)
        assert slack.ephemerals[before:] == []  # the buttons say it; nobody is told more

    await tick("☐ tests", ["☐ lint", "☑ tests", "☐ docs", "Done"])
    await tick("☐ docs", ["☐ lint", "☑ tests", "☑ docs", "Done"])
    await tick("☑ tests", ["☐ lint", "☐ tests", "☑ docs", "Done"])
    # The question's text stayed as it was through each change of its buttons.
    assert "Which checks should run?" in rendered(_shown(slack, message))

    done = dict(buttons(_shown(slack, message)))["Done"]
    assert "answered 'docs' by u0alice on Slack" in await _press(slack, message, done)
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "answer": "docs"}
    await eventually(lambda: _labels(slack, message) == [] or None)
