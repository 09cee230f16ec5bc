"""Process agents from the console, in a real browser (Debian's Chromium through Playwright)
on one stack: the New agent form starts one (the scripted ACP agent, a real process) in a
folder under acp.roots, of a kind the operator named, through the checks a chat's /new goes
through, and says why it refuses a folder outside them; the agent's page shows its turn as it
streams (its words, its tool calls), still there after a reload mid-turn, then how it ended,
and its buttons start a new session and stop it.
What a page is told of a turn's updates is tested first, as units."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect
from temporalio.testing import WorkflowEnvironment

from agentcomms.acp.asking import shown
from agentcomms.acp.client import _update
from agentcomms.config import Config, ConsoleConfig
from agentcomms.models import Agent
from gateway.console.turns import TurnSoFar
from tests.support import acp_agent
from tests.support.acp_agent import log_of
from tests.support.browser import SHOWN_S, open_console
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually

SCRIPTED = [sys.executable, acp_agent.__file__]


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        (
            "agent_message_chunk",
            {"content": {"type": "text", "text": "Hi"}},
            {"kind": "text", "text": "Hi"},
        ),
        (
            "agent_thought_chunk",
            {"content": {"type": "text", "text": "hm"}},
            {"kind": "thought", "text": "hm"},
        ),
        ("agent_message_chunk", {"content": {"type": "image", "data": "x"}}, None),
        (
            "tool_call",
            {"toolCallId": "c1", "title": "ls", "status": "pending", "rawInput": {"x": 1}},
            {"kind": "tool", "id": "c1", "title": "ls", "status": "pending"},
        ),
        (
            "tool_call_update",
            {"toolCallId": "c1", "status": "completed"},
            {"kind": "tool", "id": "c1", "status": "completed"},
        ),
        (
            "plan",
            {"entries": [{"content": "read"}, {"content": 3}]},
            {"kind": "plan", "entries": ["read"]},
        ),
        ("user_message_chunk", {"content": {"type": "text", "text": "me"}}, None),
        ("available_commands_update", {}, None),
    ],
)
def test_a_console_sees_of_an_update_its_words_tools_and_plan_only(
    kind: str, raw: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    update = _update({"sessionId": "s"}, {"sessionUpdate": kind, **raw})
    assert shown(update) == expected


def test_a_turn_so_far_joins_its_words_and_keeps_each_tool_as_it_goes() -> None:
    turn = TurnSoFar()
    turn.apply([{"kind": "text", "text": "Look"}, {"kind": "tool", "id": "c1", "title": "ls"}])
    turn.apply(
        [{"kind": "tool", "id": "c1", "status": "completed"}, {"kind": "text", "text": "ed."}]
    )
    turn.apply([{"kind": "thought", "text": "not shown"}, {"kind": "tool"}])
    assert turn.text == "Looked." and turn.tools == {"c1": {"title": "ls", "status": "completed"}}


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("roots").resolve()


@pytest.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory, roots: Path
) -> AsyncIterator[Stack]:
    def configure(cfg: Config) -> Config:
        acp = cfg.acp.model_copy(update={"roots": [roots], "kinds": {"scripted": SCRIPTED}})
        console = ConsoleConfig(enabled=True, port=0)
        return cfg.model_copy(update={"acp": acp, "console": console})

    with pytest.MonkeyPatch.context() as patch:  # the console's token in a home of its own
        patch.setenv("AGENTCOMMS_HOME", str(tmp_path_factory.mktemp("home")))
        async with running_stack(
            temporal_env.client, tmp_path_factory.mktemp("stack"), configure=configure
        ) as s:
            yield s


async def state_is(stack: Stack, agent: str, state: str) -> Agent | None:
    row = await stack.store.get_agent(agent)
    return row if row is not None and row.state == state else None


async def test_the_new_agent_form_starts_a_process_agent_in_a_folder_under_the_roots(
    stack: Stack, page: Page, roots: Path
) -> None:
    folder = roots / "api"
    folder.mkdir()
    agent = stack.agent_id("console-new")
    await open_console(page, stack)
    await page.locator("#new-agent").evaluate("details => { details.open = true }")
    form = page.locator("form.new-agent")
    await form.get_by_label("Id").fill(agent)
    await form.get_by_label("Kind").select_option("scripted")
    await form.get_by_label("Folder").fill("/etc")
    await form.get_by_role("button", name="Start").click()
    await expect(form.locator("output")).to_have_text(
        f"not started: /etc is not under a folder open to agents; those are: {roots}",
        timeout=SHOWN_S,
    )
    assert await stack.store.get_agent(agent) is None

    await form.get_by_label("Folder").fill(f"{roots}/other/../api")
    await form.get_by_role("button", name="Start").click()
    await page.wait_for_url(f"**/agents/{agent}", timeout=SHOWN_S)
    state = page.locator(f'p.facts[data-agent="{agent}"] [data-field="state"]')
    await expect(state).to_have_text("ready", timeout=30_000)
    row = await stack.store.get_agent(agent)
    assert row is not None and row.type == "process"
    assert [e["cwd"] for e in log_of(folder) if "new_session" in e] == [str(folder)]


async def test_the_agents_page_shows_its_turn_as_it_streams_and_how_it_ended(
    stack: Stack, page: Page, tmp_path: Path
) -> None:
    agent = stack.agent_id("console-turn")
    await stack.call("start_agent", agent_id=agent, dir=str(tmp_path), command=SCRIPTED)
    await eventually(lambda: state_is(stack, agent, "ready"), timeout=30)
    await open_console(page, stack, f"/agents/{agent}")
    turn = page.locator("#live-turn")
    await expect(turn.locator('[data-turn="state"]')).to_have_text(
        "no turn since the gateway started"
    )

    # The turn runs on (it hangs until cancelled) while its words and tool show.
    await stack.call(
        "send",
        agent_id=agent,
        message="acp:tool ls -la\nacp:say Looking at the files now\nacp:hang",
    )
    text = turn.locator('[data-turn="text"]')
    await expect(text).to_have_text("Looking at the files now", timeout=SHOWN_S)
    tool = turn.locator('[data-turn="tools"] li')
    await expect(tool).to_have_text("ls -la completed")
    await expect(turn.locator('[data-turn="state"]')).to_have_text("running…")
    # A page opened mid-turn shows what came so far.
    await page.reload()
    await expect(text).to_have_text("Looking at the files now", timeout=SHOWN_S)
    await expect(turn.locator('[data-turn="state"]')).to_have_text("running…")

    await page.get_by_role("button", name="Interrupt").click()
    await expect(turn.locator('[data-turn="state"]')).to_have_text(
        "ended: cancelled", timeout=SHOWN_S
    )
    # The next turn starts afresh; its end is in the timeline too.
    await stack.call("send", agent_id=agent, message="acp:say All done.")
    await expect(text).to_have_text("All done.", timeout=SHOWN_S)
    await expect(turn.locator('[data-turn="state"]')).to_have_text("ended: end_turn")
    await expect(tool).to_have_count(0)
    await expect(page.locator("#timeline .item-system").first).to_contain_text(
        "turn ended: end_turn (1 message)", timeout=SHOWN_S
    )

    # Its buttons: a new session (the old one left), then a stop.
    await page.get_by_role("button", name="New session").click()
    await expect(page.locator("form.actions output").first).to_have_text(
        "a new session starts; the old one is left as it was", timeout=SHOWN_S
    )
    await eventually(lambda: len(sessions(tmp_path)) == 2, timeout=30)
    await page.get_by_role("button", name="Stop").click()
    state = page.locator(f'p.facts[data-agent="{agent}"] [data-field="state"]')
    await expect(state).to_have_text("offline", timeout=SHOWN_S)
    assert [e for e in log_of(tmp_path) if e.get("stdin_closed")]


def sessions(folder: Path) -> list[str]:
    return [e["new_session"] for e in log_of(folder) if "new_session" in e]
