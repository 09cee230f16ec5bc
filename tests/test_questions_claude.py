"""The real Claude Code asks its human through its `PermissionRequest` hook, installed by
`agentcomms install claude-code`: a question (`AskUserQuestion`) answered with `agentcomms
answer` reaches the model as the tool's result, and a plan (`ExitPlanMode`) approved with
`agentcomms approve` lets Claude leave plan mode, while one sent back with `deny -m` keeps it
planning with the human's reason. Never keystrokes: the pane is only read.

One Claude, on its own tmux server, serves the module; its hooks find the agent by their pane."""

from __future__ import annotations

from typing import Any

from tests.fakes.anthropic import FakeAnthropic, ToolResult, text, tool, write_plan
from tests.support.agents import PLAN_MODE, Attended, ClaudePane
from tests.support.cli import cli
from tests.support.waiting import eventually

PLAN = "# Plan\n1. Add the endpoint\n2. Test it"
# Claude Code's question dialog, under its options.
QUESTION_DIALOG = "Enter to select"


Setup = Attended[ClaudePane]


def _result_of(model: FakeAnthropic, tool_use: str) -> ToolResult | None:
    """The result the model saw for its call of `tool_use` (the fake numbers its calls)."""
    return next((r for r in model.tool_results if r.tool_use_id == tool_use), None)


async def test_a_question_answered_from_the_cli_reaches_the_model(attended_claude: Setup) -> None:
    claude, model = attended_claude.pane, attended_claude.pane.model
    colour = {
        "question": "Which colour should the button be?",
        "header": "Colour",
        "options": [
            {"label": "red", "description": "warm"},
            {"label": "blue", "description": "cold"},
        ],
        "multiSelect": False,
    }
    model.on(
        "ask me the colour",
        tool("AskUserQuestion", questions=[colour]),
        text("Blue it is."),
    )
    seen = len(model.tool_results)
    await claude.type("ask me the colour")
    asked = await eventually(lambda: attended_claude.approval("question"), timeout=30)
    assert (asked["question"], asked["options"]) == (colour["question"], ["red", "blue"])

    done = await cli(attended_claude.home, "answer", asked["id"], "blue")
    assert done.returncode == 0, done.stderr
    result = await eventually(lambda: model.result_after(seen), timeout=30)
    print(f"the model read: {result.content!r}")
    assert not result.is_error
    assert '"Which colour should the button be?"="blue"' in result.content
    await claude.wait_for_screen("Blue it is.")


async def _plan_asked(attended_claude: Setup, words: str) -> tuple[dict[str, Any], int]:
    claude, model = attended_claude.pane, attended_claude.pane.model
    await claude.plan_mode()  # from whichever mode the last test left
    model.on(words, write_plan(PLAN), tool("ExitPlanMode"), text("On it."))
    seen = len(model.tool_results)
    await claude.type(words)
    asked = await eventually(lambda: attended_claude.approval("plan"), timeout=30)
    assert asked["question"] == PLAN
    return asked, seen + 1  # the plan file's write came first


async def test_a_plan_approved_from_the_cli_leaves_plan_mode(attended_claude: Setup) -> None:
    claude, model = attended_claude.pane, attended_claude.pane.model
    asked, seen = await _plan_asked(attended_claude, "plan the endpoint")
    done = await cli(attended_claude.home, "approve", asked["id"])
    assert done.returncode == 0, done.stderr
    result = await eventually(lambda: model.result_after(seen), timeout=30)
    print(f"the model read: {result.content!r}")
    assert not result.is_error
    assert "approved your plan" in result.content and "Add the endpoint" in result.content
    screen = await claude.wait_for_screen("On it.")
    assert PLAN_MODE not in screen


async def test_a_plan_sent_back_keeps_claude_planning_with_the_reason(
    attended_claude: Setup,
) -> None:
    claude, model = attended_claude.pane, attended_claude.pane.model
    asked, seen = await _plan_asked(attended_claude, "plan the migration")
    done = await cli(attended_claude.home, "deny", asked["id"], "-m", "write the tests first")
    assert done.returncode == 0, done.stderr
    result = await eventually(lambda: model.result_after(seen), timeout=30)
    print(f"the model read: {result.content!r}")
    assert result.is_error and "write the tests first" in result.content
    screen = await claude.wait_for_screen("On it.")
    assert PLAN_MODE in screen


async def test_a_question_answered_in_claudes_own_dialog_closes_its_approval(
    attended_claude: Setup,
) -> None:
    claude, model = attended_claude.pane, attended_claude.pane.model
    await claude.wait_for_screen("On it.")  # the last test's turn is over
    size = {
        "question": "Which size?",
        "header": "Size",
        "options": [{"label": "small", "description": ""}, {"label": "large", "description": ""}],
        "multiSelect": False,
    }
    model.on("ask me the size", tool("AskUserQuestion", questions=[size]), text("Sized."))
    await claude.type("ask me the size")
    asked = await eventually(lambda: attended_claude.approval("question"), timeout=30)
    await claude.wait_for_screen("Which size?")
    # The human, at the pane, picks the first option (the dialog's own hint goes with it).
    await claude.answer(QUESTION_DIALOG, "Enter")
    await claude.wait_for_screen("Sized.")

    async def closed() -> bool:
        return await attended_claude.approval("question") is None

    await eventually(closed, timeout=30)
    late = await cli(attended_claude.home, "answer", asked["id"], "large")
    assert "was answered already: answered in the terminal" in late.stdout


async def test_a_multi_select_question_answered_with_several_options_reaches_the_model(
    attended_claude: Setup,
) -> None:
    claude, model = attended_claude.pane, attended_claude.pane.model
    await claude.wait_for_screen("Sized.")  # the last test's turn is over
    checks = {
        "question": "Which checks should run?",
        "header": "Checks",
        "options": [
            {"label": "lint", "description": ""},
            {"label": "tests", "description": ""},
            {"label": "docs", "description": ""},
        ],
        "multiSelect": True,
    }
    model.on("ask me the checks", tool("AskUserQuestion", questions=[checks]), text("Checked."))
    seen = len(model.tool_results)
    await claude.type("ask me the checks")
    asked = await eventually(lambda: attended_claude.approval("question"), timeout=30)
    # What Done sends once lint and docs are ticked in a chat: the labels in the options' order.
    done = await cli(attended_claude.home, "answer", asked["id"], "lint, docs")
    assert done.returncode == 0, done.stderr
    result = await eventually(lambda: model.result_after(seen), timeout=30)
    print(f"the model read: {result.content!r}")
    assert not result.is_error
    assert '"Which checks should run?"="lint, docs"' in result.content
    await claude.wait_for_screen("Checked.")
