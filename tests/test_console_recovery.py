"""The console when things go wrong around it, in a real browser: the gateway restarting under an
open page (it waits, comes back by itself, nothing lost or doubled), an approval nobody answered
closing at its deadline (in the page and the chat), one answered first elsewhere, a message the
console cannot take (its mailbox full, the gateway gone), and one to an offline agent, delivered
once the agent is back."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, Response, Route, expect
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, ConsoleConfig, MailboxConfig
from agentcomms.config.models import AgentConfig, ApprovalsConfig
from tests.fakes.telegram import FakeTelegram
from tests.support.browser import SHOWN_S, console_address, keep_console_port, open_console
from tests.support.chat import CHAT, connected, with_telegram
from tests.support.events import message, record_all
from tests.support.fake_agent import PROMPT, ready_agent, state_is, working
from tests.support.stack import Stack, answered_by_this_process, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually
from workflows.approval.client import Approvals

# The shortest wait for an answer the settings allow: an approval here times out in the test.
TIMEOUT_S = 5


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    home: Path,
    telegram: FakeTelegram,
    agent: str,
) -> AsyncIterator[Stack]:
    """A stack serving the console whose approvals time out soon, whose mailboxes hold one
    message each, and where Alice approves `agent`'s requests on Telegram."""

    def configure(cfg: Config) -> Config:
        cfg = with_telegram(telegram, agent)(cfg)
        approver = AgentConfig(target="nowhere:0.0", approvers=[f"telegram:{CHAT}"])
        return cfg.model_copy(
            update={
                "console": ConsoleConfig(enabled=True, port=0),
                "approvals": ApprovalsConfig(timeout_s=TIMEOUT_S),
                "agents": {agent: approver},
            }
        )

    telegram.known_chats.add(CHAT)
    async with running_stack(
        temporal_env.client, tmp_path, mailbox=MailboxConfig(max_pending=1), configure=configure
    ) as stack:
        await connected(stack, "telegram")
        yield stack


async def test_a_page_open_while_the_gateway_restarts_waits_and_comes_back(
    stack: Stack, page: Page
) -> None:
    agent_id = stack.agent_id("steady")
    await stack.call("register", agent_id=agent_id, target="nowhere:0.0")
    await eventually(lambda: stack.store.get_agent(agent_id))
    await record_all(stack.store, message(agent_id, text="before the restart"))
    keep_console_port(stack)
    await open_console(page, stack, f"/agents/{agent_id}")
    await page.evaluate("document.body.dataset.before = '1'")

    async def late(route: Route) -> None:  # a reload reaching a busy machine a moment late
        await asyncio.sleep(1)
        await route.continue_()

    await page.route(re.compile(r".*/agents/[^/]+$"), late)
    restarting = asyncio.create_task(stack.restart_gateway(down_s=6))
    try:
        # While the gateway is down the page stays the console's, saying what it waits for
        # (not the browser's own error page, which nothing of the console's brings back).
        await expect(page.locator("#live")).to_have_text("reconnecting…", timeout=SHOWN_S)
        assert page.url == f"{console_address(stack, token=False)}agents/{agent_id}"
        # The workers go on writing the projection meanwhile.
        await record_all(stack.store, message(agent_id, text="while it was down"))
    finally:
        await restarting
    # Back: read again whole, once, and live; each message shown once.
    await expect(page.locator("body[data-before]")).to_have_count(0, timeout=SHOWN_S)
    await expect(page.locator("#live")).to_have_text("live", timeout=SHOWN_S)
    await record_all(stack.store, message(agent_id, text="after it came back"))
    items = page.locator("#timeline .item .text")
    await expect(items).to_have_text(
        ["after it came back", "while it was down", "before the restart"], timeout=SHOWN_S
    )


async def test_an_approval_nobody_answered_closes_in_the_page_and_the_chat_at_its_deadline(
    stack: Stack, page: Page, telegram: FakeTelegram, agent: str
) -> None:
    await open_console(page, stack)
    # No hook waits for it (the agent was killed, or its hook gave up): nobody but the gateway
    # can tell the page and the chat it timed out.
    opened = await _opened(stack, "make deploy", agent)
    card = page.locator(f"#approval-{opened}")
    await expect(card.get_by_role("button", name="Allow", exact=True)).to_be_visible(
        timeout=SHOWN_S
    )
    posted = await eventually(lambda: telegram.request_for(opened))
    await expect(card.locator(".outcome")).to_have_text(
        "no answer in time: left to the terminal", timeout=(TIMEOUT_S + 10) * 1000
    )
    await expect(card.get_by_role("button")).to_have_count(0)
    edited = await eventually(lambda: telegram.edits or None)
    assert edited[0]["message_id"] == posted["message_id"]
    assert f"{opened}: no answer in time: left to the terminal" in edited[0]["text"]


async def test_an_approval_opened_before_a_gateway_restart_closes_at_its_deadline_too(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    opened = await _opened(stack, "make migrate", agent)
    posted = await eventually(lambda: telegram.request_for(opened))
    await stack.restart_gateway()  # the gateway that watched its deadline is gone

    def closed() -> list[dict[str, Any]] | None:
        return [e for e in telegram.edits if e["message_id"] == posted["message_id"]] or None

    edited = await eventually(closed, timeout=TIMEOUT_S + 15)
    assert f"{opened}: no answer in time: left to the terminal" in edited[0]["text"]


async def test_an_approval_answered_first_elsewhere_says_so_when_answered_from_the_page(
    stack: Stack, page: Page
) -> None:
    opened = await _opened(stack, "make release")
    # The page's stream is slow to say so (a busy machine, a sleeping laptop waking): the
    # answer's own reply is what the page shows.
    await page.route(re.compile(r".*/stream\?.*"), lambda route: None)
    await page.goto(console_address(stack))
    card = page.locator(f"#approval-{opened}")
    await stack.call("approval_decide", id=opened, behavior="deny", by="alice", via="terminal")
    await card.get_by_role("button", name="Allow", exact=True).click()
    await expect(card.locator(".outcome")).to_have_text(
        f"denied by {answered_by_this_process()} on the terminal before your answer, which was not used",
        timeout=SHOWN_S,
    )
    await expect(card.get_by_role("button")).to_have_count(0)
    decided = await Approvals(stack.client, stack.cfg.temporal.task_queue).view(opened)
    assert decided is not None and decided.decision is not None
    assert (decided.decision.behavior, decided.decision.via) == ("deny", "terminal")


async def _opened(stack: Stack, command: str, agent: str | None = None) -> str:
    """An approval for a Bash command, opened as the agent's hook opens it: its id."""
    opened = await stack.call(
        "approval_open", kind="claude-code", agent_id=agent or stack.agent_id("asking"),
        tool_name="Bash", tool_input={"command": command},
    )  # fmt: skip
    return str(opened["id"])


async def test_a_message_the_console_cannot_take_is_said_in_the_composer(
    stack: Stack, tmux: Tmux, tmp_path: Path, page: Page
) -> None:
    agent_id, fake = await ready_agent(stack, tmux, tmp_path)
    await working(stack, agent_id, fake)
    await open_console(page, stack, f"/agents/{agent_id}")
    message, sent = page.get_by_label(f"Message to {agent_id}"), page.locator("#sent")
    await message.fill("first")
    await page.get_by_role("button", name="Send").click()
    await expect(sent).to_contain_text("queued", timeout=SHOWN_S)
    # Its mailbox holds one message while the agent works: the next is refused, and says why.
    await message.fill("second")
    await page.get_by_role("button", name="Send").click()
    await expect(sent).to_contain_text("not sent: ", timeout=SHOWN_S)
    await expect(sent).to_contain_text("max_pending", timeout=SHOWN_S)
    assert await message.input_value() == "second"  # kept, to send again later
    # The first one's news, arriving later, leaves the composer's word on the second alone:
    # "delivered" under "second" would say the refused message went.
    told: list[str] = []

    async def heard(answer: Response) -> None:
        if "/sent/" in answer.url:
            told.append((await answer.json())["status"])

    page.on("response", heard)
    await fake.showing(PROMPT)
    await fake.hook("Stop", last_assistant_message="done")
    await eventually(lambda: set(told) - {"queued"}, timeout=30)
    await page.evaluate("new Promise(done => setTimeout(done, 100))")  # its answer read
    await expect(sent).to_contain_text("max_pending")
    asked = await stack.call(
        "approval_open", kind="claude-code", agent_id=agent_id, tool_name="Bash",
        tool_input={"command": "make clean"},
    )  # fmt: skip
    card = page.locator(f"#approval-{asked['id']}")
    await expect(card).to_be_visible(timeout=SHOWN_S)
    # The gateway gone: the page says so in words, not as a browser's error, and of an answer
    # that it was not given.
    await stack.gateway.close()
    await page.get_by_role("button", name="Send").click()
    gone = "the console does not answer; is the gateway running (`agentcomms up`)?"
    await expect(sent).to_have_text(f"not sent: {gone}", timeout=SHOWN_S)
    await card.get_by_role("button", name="Deny").click()
    await expect(card.locator("output")).to_have_text(f"not answered: {gone}", timeout=SHOWN_S)


async def test_a_message_to_an_offline_agent_shows_queued_then_delivered_in_the_open_page(
    stack: Stack, tmux: Tmux, tmp_path: Path, page: Page
) -> None:
    agent_id, fake = await ready_agent(stack, tmux, tmp_path)
    await fake.hook("SessionEnd", reason="exit")
    await eventually(lambda: state_is(stack, agent_id, "offline"))
    await open_console(page, stack, f"/agents/{agent_id}")
    await expect(page.locator('.facts [data-field="state"]')).to_have_text("offline")
    await page.get_by_label(f"Message to {agent_id}").fill("while you were away")
    await page.get_by_role("button", name="Send").click()
    sent = page.locator("#sent")
    await expect(sent).to_contain_text("queued", timeout=SHOWN_S)
    item = page.locator("#timeline .item", has_text="while you were away")
    await expect(item.locator(".status")).to_have_text("new", timeout=SHOWN_S)
    await expect(page.locator('.facts [data-field="pending"]')).to_have_text("1", timeout=SHOWN_S)
    assert b"while you were away" not in fake.typed()
    # The agent is started again: the message is typed, and the page, never reloaded, says so.
    await page.evaluate("document.body.dataset.before = '1'")
    await fake.hook("SessionStart", source="startup")
    await eventually(lambda: b"while you were away\r" in fake.typed(), timeout=20)
    await expect(item.locator(".status")).to_have_text("delivered", timeout=SHOWN_S)
    await expect(sent).to_contain_text("delivered", timeout=SHOWN_S)
    await expect(page.locator('.facts [data-field="pending"]')).to_have_text("0", timeout=SHOWN_S)
    await expect(page.locator("body[data-before]")).to_have_count(1)
