"""The agents page with thousands of agents, in a real browser: all listed, kept live, and one
found by typing part of its name, state or host."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from agentcomms.models import Agent, utcnow
from tests.support.browser import SHOWN_S, console_address, open_console
from tests.support.stack import Stack

AGENTS = 3000


@pytest.fixture
def stack(console_stack: Stack) -> Stack:
    return console_stack


async def _write(stack: Stack, agent_id: str, state: str, host: str = "build-1") -> None:
    """The agent's row as the workers write it into the projection."""
    row = Agent(id=agent_id, target="work:0.0", host=host, status="online", state=state,
                state_since=utcnow())  # fmt: skip
    await stack.store.settle_events([], agent=row)


async def test_thousands_of_agents_are_listed_live_and_one_is_found_by_typing(
    stack: Stack, page: Page
) -> None:
    for n in range(AGENTS):
        await _write(stack, f"agent-{n:04d}", "ready", host=f"build-{n % 3}")
    await open_console(page, stack)
    rows = page.locator("#agents tbody tr")
    await expect(rows).to_have_count(AGENTS)
    shown = page.locator("#agents tbody tr:not([hidden])")
    # Typed words narrow the list to the rows holding them all, at once, and say how many.
    await page.get_by_label("Filter agents").fill("agent-2999")
    await expect(shown).to_have_count(1)
    await expect(page.locator("#shown")).to_have_text(f"1 of {AGENTS} agents")
    await page.get_by_label("Filter agents").fill("busy build-2")
    await expect(shown).to_have_count(0)
    # A row that comes to match while the page is open shows, and one that stops, hides.
    await _write(stack, "agent-1234", "busy", host="build-2")
    await _write(stack, "agent-0002", "busy", host="build-2")
    await expect(shown).to_have_count(2, timeout=SHOWN_S)
    await _write(stack, "agent-1234", "ready", host="build-2")
    await expect(shown).to_have_count(1, timeout=SHOWN_S)
    await expect(shown).to_have_attribute("data-agent", "agent-0002")
    # A new agent is listed only if it matches what the filter says.
    await _write(stack, "later-1", "busy", host="build-2")
    await _write(stack, "later-2", "ready", host="build-2")
    await expect(rows).to_have_count(AGENTS + 2, timeout=SHOWN_S)
    await expect(shown).to_have_count(2)
    await expect(page.locator("#shown")).to_have_text(f"2 of {AGENTS + 2} agents")
    # The words stay in the address: a reload (the gateway back after a restart) keeps them.
    assert page.url == f"{console_address(stack, token=False)}?q=busy+build-2"
    await page.reload()
    await expect(page.get_by_label("Filter agents")).to_have_value("busy build-2")
    await expect(shown).to_have_count(2)
