"""The real Claude Code asks permission through its `PermissionRequest` hook, installed by
`agentcomms install claude-code`, and the human answers with `agentcomms approve` / `deny`: the
tool runs, or the model reads the human's reason, through Claude's own decision interface; with
the gateway stopped, Claude's own dialog shows at once.

One Claude, on its own tmux server, serves the module; its hooks find the agent by their pane."""

from __future__ import annotations

import time

from tests.fakes.anthropic import FakeAnthropic, bash, text
from tests.support.agents import PROCEED_DIALOG, Attended, ClaudePane
from tests.support.cli import cli
from tests.support.waiting import eventually

ALLOWED_BY_HOOK = "Allowed by PermissionRequest hook"


Setup = Attended[ClaudePane]


async def test_approved_from_the_terminal_the_tool_runs(attended_claude: Setup) -> None:
    claude, model = attended_claude.pane, attended_claude.pane.model
    model.on("make the approved file", bash("touch approved.txt"), text("Approved made."))
    await claude.type("make the approved file")
    approval = await eventually(attended_claude.approval, timeout=30)
    assert (approval["tool"], approval["input"]) == ("Bash", "touch approved.txt")

    done = await cli(attended_claude.home, "approve", approval["id"])
    assert done.returncode == 0, done.stderr
    assert f"{approval['id']}: allowed by" in done.stdout
    await claude.wait_for_screen(ALLOWED_BY_HOOK)
    await claude.wait_for_screen("Approved made.")
    assert (claude.project / "approved.txt").exists()
    assert any(not r.is_error for r in model.tool_results)
    # A second answer is told who answered first.
    late = await cli(attended_claude.home, "deny", approval["id"])
    assert "was answered already: allowed by" in late.stdout


async def test_denied_from_the_terminal_the_model_reads_why(attended_claude: Setup) -> None:
    claude, model = attended_claude.pane, attended_claude.pane.model
    await claude.wait_ready()
    model.on("make the denied file", bash("touch denied.txt"), text("Understood."))
    await claude.type("make the denied file")
    approval = await eventually(attended_claude.approval, timeout=30)

    done = await cli(attended_claude.home, "deny", approval["id"], "-m", "not now")
    assert done.returncode == 0, done.stderr
    await eventually(lambda: _error_result(model, "not now"), timeout=30)
    await claude.wait_for_screen("Understood.")
    assert not (claude.project / "denied.txt").exists()


def _error_result(model: FakeAnthropic, words: str) -> bool | None:
    return any(r.is_error and words in r.content for r in model.tool_results) or None


async def test_answered_in_claudes_own_dialog_the_approval_closes(attended_claude: Setup) -> None:
    claude, model = attended_claude.pane, attended_claude.pane.model
    await claude.wait_ready()
    model.on("make the dialog file", bash("touch dialog.txt"), text("Dialog made."))
    await claude.type("make the dialog file")
    approval = await eventually(attended_claude.approval, timeout=30)
    await claude.answer(PROCEED_DIALOG, "Enter")  # the human, at the pane
    await claude.wait_for_screen("Dialog made.")
    assert (claude.project / "dialog.txt").exists()

    async def closed() -> bool:
        return await attended_claude.approval() is None

    await eventually(closed, timeout=30)
    late = await cli(attended_claude.home, "approve", approval["id"])
    assert "was answered already: answered in the terminal" in late.stdout


async def test_with_the_gateway_stopped_claudes_own_dialog_shows(attended_claude: Setup) -> None:
    claude, model = attended_claude.pane, attended_claude.pane.model
    await claude.wait_ready()
    gateway = attended_claude.stack.gateway.server
    await gateway.close()
    try:
        model.on("make the local file", bash("touch local.txt"), text("Local made."))
        started = time.monotonic()
        await claude.type("make the local file")
        await claude.wait_for_screen(PROCEED_DIALOG)
        # Shown as soon as Claude shows it beside a hook: the hook did not hold it up.
        print(f"own dialog after {time.monotonic() - started:.1f} s with the gateway down")
        await claude.answer(PROCEED_DIALOG, "Enter")  # the human, at the pane
        await claude.wait_for_screen("Local made.")
        assert ALLOWED_BY_HOOK not in claude.screen().split("make the local file")[-1]
    finally:
        await gateway.start()
