"""An approval in the agent's Telegram chat: the request with Allow / Allow for this session /
Deny buttons; an allowed sender's press decides it and the message is edited to say who
answered, its buttons gone; a stranger's press changes nothing; an answer from the terminal
edits the chat too, also one given while the request was still being posted."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, connected
from tests.support.hooks import (
    SESSION_SUGGESTION,
    open_approval,
    open_question,
    permission_request,
    start_hook,
    stop_hook,
)
from tests.support.stack import Stack, answered_by_this_process
from tests.support.waiting import eventually


@pytest.fixture
async def stack(telegram_stack: Stack, telegram: FakeTelegram) -> Stack:
    telegram.known_chats.add(CHAT)  # Alice has written to the bot before
    await connected(telegram_stack, "telegram")
    return telegram_stack


def _labels(message: dict[str, Any]) -> list[str]:
    return [b["text"] for row in message["reply_markup"]["inline_keyboard"] for b in row]


async def test_an_allowed_sender_answers_with_a_button(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    approval = await open_approval(stack, agent)
    message = await eventually(lambda: telegram.request_for(approval))
    assert message["chat"]["id"] == CHAT
    assert "asks to use Bash:\ntouch done.txt" in message["text"]
    assert _labels(message) == ["Allow", "Allow for this session", "Deny"]

    stranger = {**message}
    telegram.human_presses(stranger, f"ap:{approval}:a", user_id=666, first_name="Mallory")
    await eventually(lambda: len(telegram.answered_presses) == 1 or None)
    assert "allowed senders" in telegram.answered_presses[0]["text"]
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}

    telegram.human_presses(message, f"ap:{approval}:s", user_id=CHAT, first_name="Alice")
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "updatedPermissions": [SESSION_SUGGESTION]}
    assert (waited["decided_by"], waited["decided_via"]) == ("Alice", "telegram")
    edited = await eventually(lambda: telegram.edits or None)
    assert edited[0]["message_id"] == message["message_id"]
    assert f"{approval}: allowed for the session by Alice on Telegram" in edited[0]["text"]
    assert "reply_markup" not in next(
        m for m in telegram.sent if m["message_id"] == message["message_id"]
    )

    telegram.human_presses(message, f"ap:{approval}:d", user_id=CHAT, first_name="Alice")
    await eventually(lambda: len(telegram.answered_presses) == 3 or None)
    assert "was answered already" in telegram.answered_presses[-1]["text"]


async def test_an_answer_from_the_terminal_edits_the_chat(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    approval = await open_approval(stack, agent)
    await eventually(lambda: telegram.request_for(approval))
    await stack.call("approval_decide", id=approval, behavior="deny", by="bob", message="no")
    edited = await eventually(lambda: telegram.edits or None)
    assert (
        f"{approval}: denied by {answered_by_this_process()} on the command line"
        in edited[0]["text"]
    )


async def test_decided_while_its_request_was_still_being_posted_the_buttons_go_too(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    released = telegram.hold("sendMessage")  # Telegram took the request, has not answered
    approval = await open_approval(stack, agent)
    message = await eventually(lambda: telegram.request_for(approval))
    await stack.call("approval_decide", id=approval, behavior="deny", by="bob", message="no")
    released.set()
    edited = await eventually(lambda: telegram.edits or None)
    assert edited[0]["message_id"] == message["message_id"]
    assert (
        f"{approval}: denied by {answered_by_this_process()} on the command line"
        in edited[0]["text"]
    )
    assert "reply_markup" not in message


async def test_a_questions_options_are_buttons_and_a_press_answers_it(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    approval = await open_question(
        stack, agent, ["red", "blue"], question="Which colour?", header="Colour", several=False
    )
    message = await eventually(lambda: telegram.request_for(approval))
    assert f"{agent} asks: Which colour?" in message["text"]
    assert _labels(message) == ["red", "blue"]

    telegram.human_presses(message, f"ap:{approval}:o2", user_id=CHAT, first_name="Alice")
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "answer": "blue"}
    edited = await eventually(lambda: telegram.edits or None)
    assert f"{approval}: answered 'blue' by Alice on Telegram" in edited[0]["text"]


async def test_several_options_or_own_words_are_answered_by_reply(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    approval = await open_question(stack, agent, ["lint", "tests", "docs"])
    message = await eventually(lambda: telegram.request_for(approval))
    assert f"Reply ANSWER {approval} followed by an option's number or label" in message["text"]

    telegram.human_says(CHAT, f"ANSWER {approval} 1, tests", first_name="Alice")
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "answer": "lint, tests"}
    told = await eventually(lambda: [t for t in telegram.texts_to(CHAT) if "lint, tests" in t])
    assert f"{approval}: answered 'lint, tests' by Alice on Telegram" in told[0]


async def test_a_plan_is_posted_with_approve_and_keep_planning(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    opened = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id=agent,
        tool_name="ExitPlanMode",
        tool_input={"plan": "# Plan\n1. Add the endpoint"},
    )
    approval = opened["id"]
    message = await eventually(lambda: telegram.request_for(approval))
    assert "asks to carry out its plan:\n# Plan\n1. Add the endpoint" in message["text"]
    assert _labels(message) == ["Approve", "Keep planning"]
    telegram.human_presses(message, f"ap:{approval}:d", user_id=CHAT, first_name="Alice")
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "deny", "message": "Alice asks you to keep planning."}
    edited = await eventually(lambda: telegram.edits or None)
    assert f"{approval}: sent back to planning by Alice on Telegram" in edited[0]["text"]


async def test_a_question_that_takes_several_options_is_ticked_then_done(
    stack: Stack, telegram: FakeTelegram, agent: str, tmp_path: Path
) -> None:
    question = {
        "question": "Which checks should run?",
        "header": "Checks",
        "options": [{"label": label, "description": ""} for label in ("lint", "tests", "docs")],
        "multiSelect": True,
    }
    asked = {"questions": [question]}
    hook = start_hook(stack, permission_request("AskUserQuestion", asked), agent, tmp_path)
    try:
        message = await eventually(
            lambda: next((m for m in telegram.sent if "Which checks" in m["text"]), None),
            timeout=30,
        )
        approval = message["text"].split("(approval ")[1][:4]
        assert _labels(message) == ["☐ lint", "☐ tests", "☐ docs", "Done"]

        async def press(data: str, *, user_id: int = CHAT, name: str = "Alice") -> str:
            # One press at a time, each on the keyboard as the last press left it.
            answered = len(telegram.answered_presses)
            telegram.human_presses(
                message, f"ap:{approval}:{data}", user_id=user_id, first_name=name
            )
            await eventually(lambda: len(telegram.answered_presses) > answered or None)
            return str(telegram.answered_presses[-1]["text"])

        assert "tick at least one option" in await press("done")
        assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}

        assert "ticked lint" in await press("t1")
        assert "ticked lint, docs" in await press("t3")
        assert _labels(message) == ["☑ lint", "☐ tests", "☑ docs", "Done"]
        assert "allowed senders" in await press("t2", user_id=666, name="Mallory")
        assert "allowed senders" in await press("done", user_id=666, name="Mallory")
        assert len(telegram.markup_edits) == 2
        assert _labels(message) == ["☑ lint", "☐ tests", "☑ docs", "Done"]
        events = await stack.store.events_after(agent, None, 50)
        refused = [e.payload["text"] for e in events if e.status == "rejected"]
        assert refused == [f"pressed a button: ap:{approval}:{d}" for d in ("t2", "done")]
        assert "ticked docs" in await press("u1")
        assert "ticked tests, docs" in await press("t2")
        assert _labels(message) == ["☐ lint", "☑ tests", "☑ docs", "Done"]

        assert "answered 'tests, docs' by Alice on Telegram" in await press("done")
        out, err = await asyncio.to_thread(hook.communicate, timeout=30)
    finally:
        stop_hook(hook)
    assert hook.returncode == 0, err
    decision = json.loads(out)["hookSpecificOutput"]["decision"]
    assert decision["updatedInput"]["answers"] == {"Which checks should run?": "tests, docs"}
    edited = await eventually(lambda: telegram.edits or None)
    assert f"{approval}: answered 'tests, docs' by Alice on Telegram" in edited[0]["text"]
    assert "reply_markup" not in message
    assert "was answered already" in await press("t1")
    assert "reply_markup" not in message


async def test_ticks_outlive_a_gateway_restart_and_presses_in_quick_succession(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    approval = await open_question(stack, agent, ["lint", "tests", "docs"])
    message = await eventually(lambda: telegram.request_for(approval))

    async def presses(*data: str) -> str:
        """Pressed one right after the other: each carries the buttons as they were before any
        of them was answered, as Telegram sends them when the edits have not landed yet. Each
        waits for its own answer: a press the old gateway answered but had not yet confirmed
        comes again to the new one, as Telegram sends it again, and is answered once more."""
        asked = [
            telegram.human_presses(copy.deepcopy(message), f"ap:{approval}:{d}", user_id=CHAT)
            for d in data
        ]

        def answered() -> str | None:
            said = {str(p["callback_query_id"]): str(p["text"]) for p in telegram.answered_presses}
            return said[asked[-1]] if all(a in said for a in asked) else None

        return str(await eventually(answered))

    await presses("t1")
    assert _labels(message) == ["☑ lint", "☐ tests", "☐ docs", "Done"]
    # Nothing of the selection was in the old gateway's memory alone.
    await stack.restart_gateway()
    await connected(stack, "telegram")
    await presses("t2", "t3")
    assert _labels(message) == ["☑ lint", "☑ tests", "☑ docs", "Done"]
    await presses("u2", "done")
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "answer": "lint, docs"}


async def test_a_button_left_under_an_earlier_request_of_the_same_id_answers_nothing(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    """A request's buttons left in the chat (its message never edited), and, once Temporal
    forgot that run, a new request that drew the same short id: Allow pressed under the old
    message is bound to the old request, and the new one stays open."""
    from temporalio.common import WorkflowIDReusePolicy

    from agentcomms.trust import DeploymentKey
    from agentcomms.workflow_ids import approval_workflow_id
    from tests.support.stack import STACK_KEY
    from workflows.approval.client import Approvals
    from workflows.approval.models import ApprovalInput
    from workflows.approval.workflow import ApprovalWorkflow

    approval = await open_approval(stack, agent)
    old = await eventually(lambda: telegram.request_for(approval))
    [allow] = [
        b["callback_data"]
        for row in old["reply_markup"]["inline_keyboard"]
        for b in row
        if b["text"] == "Allow"
    ]
    approvals = Approvals(stack.client, stack.cfg.temporal.task_queue)
    view = await approvals.view(approval)
    assert view is not None
    await approvals.handle(approval).terminate()
    again = view.request.model_copy(update={"nonce": "", "signature": None})
    await stack.client.start_workflow(
        ApprovalWorkflow.run,
        ApprovalInput(request=DeploymentKey(STACK_KEY.encode()).sign_approval(again)),
        id=approval_workflow_id(approval),
        task_queue=stack.cfg.temporal.task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )
    telegram.human_presses(old, allow, user_id=CHAT, first_name="Alice")
    told = await eventually(lambda: telegram.answered_presses or None)
    assert "under an earlier request that was also called" in told[0]["text"]
    assert (await stack.call("approval_wait", id=approval, wait_s=1)) == {"status": "open"}
    await approvals.handle(approval).terminate()
