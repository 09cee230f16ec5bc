"""Questions and plans through the gateway, as Claude Code's hook opens them: a question
(`AskUserQuestion`) is one approval per question, listed with its options and answered with
`agentcomms answer` by label, number or words; the hook hands the answers back in the tool's
`updatedInput`. A plan (`ExitPlanMode`) is approved or sent back with the human's reason, and
listed whole however long."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agentcomms.approval_models import chosen
from tests.support.cli import cli, cli_home, inbox_followed
from tests.support.hooks import permission_request, start_hook, stop_hook
from tests.support.stack import Stack
from tests.support.waiting import eventually

COLOUR = {
    "question": "Which colour?",
    "header": "Colour",
    "options": [
        {"label": "red", "description": "warm"},
        {"label": "blue", "description": "cold"},
        {"label": "green", "description": "calm"},
    ],
    "multiSelect": False,
}
SIZES = {
    "question": "Which sizes?",
    "header": "Sizes",
    "options": [{"label": "S", "description": ""}, {"label": "M", "description": ""}],
    "multiSelect": True,
}
PLAN = "# Plan\n1. Add the endpoint\n2. Test it"


async def _listed(stack: Stack, agent: str, count: int = 1) -> list[dict[str, Any]] | None:
    """The agent's open approvals once there are `count` (one per question, opened in turn)."""
    rows = [r for r in (await stack.call("approvals"))["approvals"] if r["agent_id"] == agent]
    return rows if len(rows) >= count else None


def test_an_answer_names_an_option_by_label_or_number_or_is_the_humans_words() -> None:
    options = ["red", "blue", "green"]
    assert chosen(options, " Blue ") == "blue"
    assert chosen(options, "3") == "green"
    assert chosen(options, "1, blue") == "red, blue"
    assert chosen(options, "neither: use teal") == "neither: use teal"
    assert chosen(options, "7") == "7"


async def test_each_question_is_listed_with_its_options_and_answered_from_the_cli(
    stack: Stack, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    asked = {"questions": [COLOUR, SIZES]}
    hook = start_hook(stack, permission_request("AskUserQuestion", asked), agent, tmp_path)
    home = cli_home(tmp_path, stack)
    try:
        rows = await eventually(lambda: _listed(stack, agent, 2), timeout=30)
        assert [(r["ask"], r["question"], r["options"]) for r in rows] == [
            ("question", "Which colour?", ["red", "blue", "green"]),
            ("question", "Which sizes?", ["S", "M"]),
        ]
        listing = await cli(home, "approvals")
        assert "1. red" in listing.stdout and f"answer {rows[0]['id']}" in listing.stdout

        refused = await cli(home, "approve", rows[0]["id"])
        assert refused.returncode != 0
        assert f"agentcomms answer {rows[0]['id']}" in refused.stderr

        done = await cli(home, "answer", rows[0]["id"], "2")
        assert done.returncode == 0, done.stderr
        assert "answered 'blue'" in done.stdout
        done = await cli(home, "answer", rows[1]["id"], "s, M")
        assert done.returncode == 0, done.stderr
        out, err = await asyncio.to_thread(hook.communicate, timeout=30)
    finally:
        stop_hook(hook)
    assert hook.returncode == 0, err
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {
                "behavior": "allow",
                "updatedInput": {
                    **asked,
                    "answers": {"Which colour?": "blue", "Which sizes?": "S, M"},
                },
            },
        }
    }


async def test_a_question_answered_in_the_humans_own_words(stack: Stack) -> None:
    opened = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id=stack.agent_id(),
        tool_name="AskUserQuestion",
        tool_input={"questions": [COLOUR]},
    )
    await stack.call(
        "approval_decide", id=opened["id"], behavior="answer", answer="teal, \x1b[31mplease"
    )
    waited = await stack.call("approval_wait", id=opened["id"], wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "answer": "teal, please"}
    assert waited["answer"] == "teal, please"


async def test_a_declined_question_tells_the_model_why(stack: Stack, tmp_path: Path) -> None:
    agent = stack.agent_id()
    asked = {"questions": [COLOUR, SIZES]}
    hook = start_hook(stack, permission_request("AskUserQuestion", asked), agent, tmp_path)
    try:
        rows = await eventually(lambda: _listed(stack, agent, 2), timeout=30)
        assert [r["question"] for r in rows] == ["Which colour?", "Which sizes?"]
        await stack.call("approval_decide", id=rows[0]["id"], behavior="deny", message="later")
        out, _ = await asyncio.to_thread(hook.communicate, timeout=30)
    finally:
        stop_hook(hook)
    decision = json.loads(out)["hookSpecificOutput"]["decision"]
    assert decision == {"behavior": "deny", "message": "later"}


async def test_a_plan_is_listed_and_approved_or_sent_back(stack: Stack, tmp_path: Path) -> None:
    agent = stack.agent_id()
    home = cli_home(tmp_path, stack)
    tool_input = {"plan": PLAN, "planFilePath": "/home/me/.claude/plans/p.md"}
    for verb, expected in (
        # Claude Code's plan dialog takes an allow only with the input it answers.
        (["approve"], {"behavior": "allow", "updatedInput": tool_input}),
        (["deny", "-m", "split step 1"], {"behavior": "deny", "message": "split step 1"}),
    ):
        hook = start_hook(stack, permission_request("ExitPlanMode", tool_input), agent, tmp_path)
        try:
            rows = await eventually(lambda: _listed(stack, agent), timeout=30)
            assert [(r["ask"], r["question"]) for r in rows] == [("plan", PLAN)]
            refused = await cli(home, "answer", rows[0]["id"], "yes")
            assert "is a plan, not a question: approve or deny it" in refused.stderr
            done = await cli(home, verb[0], rows[0]["id"], *verb[1:])
            assert done.returncode == 0, done.stderr
            out, err = await asyncio.to_thread(hook.communicate, timeout=30)
        finally:
            stop_hook(hook)
        assert json.loads(out)["hookSpecificOutput"]["decision"] == expected, err
        await eventually(lambda: _gone(stack, agent), timeout=30)


async def _gone(stack: Stack, agent: str) -> bool | None:
    return (await _listed(stack, agent)) is None or None


async def test_a_permission_request_is_not_answered_with_words(stack: Stack) -> None:
    from agentcomms.errors import GatewayError

    opened = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id=stack.agent_id(),
        tool_name="Bash",
        tool_input={"command": "touch x"},
    )
    try:
        await stack.call("approval_decide", id=opened["id"], behavior="answer", answer="yes")
    except GatewayError as exc:
        assert "is a permission request, not a question" in str(exc)
    else:
        raise AssertionError("a permission request took an answer")


async def test_inbox_follow_shows_a_question_with_its_options(stack: Stack, tmp_path: Path) -> None:
    async with inbox_followed(stack, tmp_path) as output:
        agent = stack.agent_id()
        opened = await stack.call(
            "approval_open",
            kind="claude-code",
            agent_id=agent,
            tool_name="AskUserQuestion",
            tool_input={"questions": [COLOUR]},
        )
        line = (await asyncio.wait_for(output.readline(), 30)).decode()
        assert f"{agent} asks: Which colour? (1. red / 2. blue / 3. green)" in line
        assert f"agentcomms answer {opened['id']}" in line


async def test_the_terminal_lists_a_long_plan_whole(stack: Stack, tmp_path: Path) -> None:
    """The chats that show a plan's start send the human here for the rest of it."""
    steps = "\n".join(f"{n}. Move module {n} behind the new interface." for n in range(150))
    opened = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id=stack.agent_id(),
        tool_name="ExitPlanMode",
        tool_input={"plan": f"# Plan\n{steps}\nLast: celebrate"},
    )
    listing = await cli(cli_home(tmp_path, stack), "approvals")
    assert listing.returncode == 0, listing.stderr
    assert opened["id"] in listing.stdout and "celebrate" in listing.stdout
