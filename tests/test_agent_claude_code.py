"""The real Claude Code in a tmux pane against the scripted model: what the other tests of agents
stand on. It starts at its prompt, a typed prompt reaches the model and the model's answer shows
in the pane, a tool call asks for permission in manual mode, and the first-start dialog can be
asked for."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.fakes.anthropic import FakeAnthropic, bash, text
from tests.support.agents import (
    AUTO_MODE_DIALOG,
    BUSY_HINT,
    PROCEED_DIALOG,
    PROMPT_HINT,
    ClaudePane,
    start_claude,
)
from tests.support.tmux import Tmux
from tests.support.waiting import eventually


async def test_claude_starts_at_its_prompt_in_manual_mode(module_claude: ClaudePane) -> None:
    screen = module_claude.screen()
    assert PROMPT_HINT in screen
    assert "manual mode on" in screen
    assert AUTO_MODE_DIALOG not in screen


async def test_a_typed_prompt_reaches_the_model_and_its_answer_shows(
    module_claude: ClaudePane,
) -> None:
    module_claude.model.on("what is the colour of the sky", text("The sky is teal today."))

    await module_claude.type("what is the colour of the sky")

    assert await module_claude.model.wait_for_human("colour of the sky") == (
        "what is the colour of the sky"
    )
    await module_claude.wait_for_screen("The sky is teal today.")
    await module_claude.wait_ready()


async def test_a_tool_call_asks_for_permission_and_its_result_reaches_the_model(
    module_claude: ClaudePane,
) -> None:
    model = module_claude.model
    model.on("make the marker file", bash("touch marker.txt"), text("Marker made."))

    await module_claude.type("make the marker file")

    screen = await module_claude.wait_for_screen(PROCEED_DIALOG)
    assert "touch marker.txt" in screen
    assert not (module_claude.project / "marker.txt").exists()
    await module_claude.answer(PROCEED_DIALOG, "Enter")  # "1. Yes" is selected

    await module_claude.wait_for_screen("Marker made.")
    assert (module_claude.project / "marker.txt").exists()
    results = await eventually(lambda: model.tool_results)
    assert [(r.content, r.is_error) for r in results] == [
        ("(Bash completed with no output)", False)
    ]


async def test_the_first_start_dialog_shows_when_asked_for(
    tmux: Tmux, tmp_path: Path, anthropic: FakeAnthropic
) -> None:
    claude = await start_claude(tmux, tmp_path, anthropic, skip_auto_dialog=False)

    screen = claude.screen()
    assert AUTO_MODE_DIALOG in screen
    assert PROMPT_HINT not in screen
    assert anthropic.human_texts == []


async def test_a_held_turn_keeps_claude_busy_until_released(module_claude: ClaudePane) -> None:
    model = module_claude.model
    release = asyncio.Event()
    model.on("take your time", text("Took my time.", hold=release))

    await module_claude.type("take your time")
    await model.wait_for_human("take your time")
    busy = await module_claude.wait_for_screen(BUSY_HINT)
    assert PROMPT_HINT not in busy

    release.set()
    await module_claude.wait_for_screen("Took my time.")
    assert BUSY_HINT not in await module_claude.wait_ready()
