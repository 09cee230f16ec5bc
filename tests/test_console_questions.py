"""Questions and plans answered in the console on a phone's browser (Debian's Chromium through
Playwright, a phone's screen and touch): a box per option, ticked by tapping its row, and Done,
which answers with the ticked options through the approvals' one decide path, as Done in a chat
does; Done with nothing ticked answers nothing; Enter in a text field sends only its words; ticks
and words stay when the stream tells a still open question again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, ViewportSize, expect

from tests.support.browser import SHOWN_S, console_address, console_cookies, open_console
from tests.support.hooks import (
    agents_approval,
    open_question,
    permission_request,
    start_hook,
    stop_hook,
)
from tests.support.stack import Stack
from tests.support.waiting import eventually
from workflows.approval.client import Approvals

LABELS = ["lint", "tests", "docs"]
CHECKS = {
    "question": "Which checks should run?",
    "header": "Checks",
    "options": [{"label": label, "description": ""} for label in LABELS],
    "multiSelect": True,
}
# A phone's screen, in CSS pixels; a row smaller than a fingertip (44 px) is missed by thumbs.
SCREEN = ViewportSize(width=390, height=844)
FINGERTIP_PX = 44


@pytest.fixture
def stack(console_stack: Stack) -> Stack:
    """Every test here reaches the console its stack's gateway serves."""
    return console_stack


@pytest.fixture
async def phone(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport=SCREEN, is_mobile=True, has_touch=True)
    try:
        yield await context.new_page()
    finally:
        await context.close()


async def test_the_ticked_options_answer_the_agents_question_with_exactly_those(
    stack: Stack, phone: Page, tmp_path: Path
) -> None:
    agent_id = stack.agent_id("checking")
    asked = permission_request("AskUserQuestion", {"questions": [CHECKS]})
    hook = start_hook(stack, asked, agent_id, tmp_path)
    try:
        approval = await eventually(lambda: agents_approval(stack, agent_id), timeout=30)
        await open_console(phone, stack)
        card = phone.locator(f"#approval-{approval}")
        await expect(card).to_contain_text("Which checks should run?")
        await expect(card.get_by_role("checkbox")).to_have_count(len(LABELS))
        for label in LABELS:
            box = card.get_by_role("checkbox", name=label, exact=True)
            await expect(box).not_to_be_checked()
            # Not a button: pressing one option would answer with it alone.
            assert await card.get_by_role("button", name=label, exact=True).count() == 0
        for label in ("lint", "docs"):
            row = card.locator("label", has=phone.get_by_role("checkbox", name=label, exact=True))
            shape = await row.bounding_box()
            assert shape is not None and shape["height"] >= FINGERTIP_PX, shape
            assert shape["x"] >= 0 and shape["x"] + shape["width"] <= SCREEN["width"], shape
            await row.get_by_text(label, exact=True).tap()  # the label's words, not the box
        ticked = [await card.get_by_role("checkbox", name=n).is_checked() for n in LABELS]
        assert ticked == [True, False, True]
        await card.get_by_role("button", name="Done").tap()
        out, err = await asyncio.to_thread(hook.communicate, timeout=30)
    finally:
        stop_hook(hook)
    assert hook.returncode == 0, err
    decision = json.loads(out)["hookSpecificOutput"]["decision"]
    assert decision["updatedInput"]["answers"] == {"Which checks should run?": "lint, docs"}
    view = await Approvals(stack.client, stack.cfg.temporal.task_queue).view(approval)
    assert view is not None and view.decision is not None
    assert (view.decision.answer, view.decision.via) == ("lint, docs", "console")
    await expect(card.locator(".outcome")).to_contain_text(
        "answered 'lint, docs' by", timeout=SHOWN_S
    )
    # Every surface hears it: a later answer from the terminal is told who answered.
    late = await stack.call("approval_decide", id=approval, behavior="answer", answer="tests")
    assert (late["accepted"], late["decided_via"]) == (False, "console")


async def test_done_with_nothing_ticked_answers_nothing(stack: Stack, phone: Page) -> None:
    agent_id = stack.agent_id("unsure")
    await open_console(phone, stack)  # open before the question: it arrives live
    approval = await open_question(stack, agent_id, LABELS)
    card = phone.locator(f"#approval-{approval}")
    await card.get_by_role("checkbox", name="tests").tap(timeout=SHOWN_S)
    await card.get_by_role("checkbox", name="tests").tap()  # and untaps it
    await card.get_by_role("button", name="Done").tap()
    told = card.locator("form.ticks output")
    await expect(told).to_contain_text(f"{approval}: tick at least one option", timeout=SHOWN_S)
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}
    # The same without the page's script, and with a box no option has.
    console = stack.gateway.console
    assert console is not None
    cookies = console_cookies(stack)
    form = {"csrf": console.access.csrf, "behavior": "answer", "answer_ticked": "1", "tick9": "1"}
    async with httpx.AsyncClient(cookies=cookies) as http:
        posted = await http.post(
            f"{console_address(stack, token=False)}approvals/{approval}", data=form
        )
    assert posted.status_code == 400 and "tick at least one option" in posted.text
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}
    # Your own words still answer it; Enter in their field sends them, not the ticks.
    await card.get_by_role("checkbox", name="lint").tap()
    await card.get_by_label("Your own answer").fill("lint only if quick")
    await card.get_by_label("Your own answer").press("Enter")
    await expect(card.locator(".outcome")).to_contain_text(
        "answered 'lint only if quick' by", timeout=SHOWN_S
    )
    waited = await stack.call("approval_wait", id=approval, wait_s=20)
    assert waited["decision"] == {"behavior": "allow", "answer": "lint only if quick"}


async def test_enter_in_a_field_sends_its_words_never_an_option_or_approve(
    stack: Stack, phone: Page
) -> None:
    """Enter in a form submits its first button: beside the options it would answer with the
    first of them, beside Approve it would carry out the plan the person was asking to change."""
    agent_id = stack.agent_id("typing")
    await open_console(phone, stack)
    question = await open_question(stack, agent_id, ["red", "blue"], several=False)
    card = phone.locator(f"#approval-{question}")
    await card.get_by_label("Your own answer").fill("green", timeout=SHOWN_S)
    await card.get_by_label("Your own answer").press("Enter")
    waited = await stack.call("approval_wait", id=question, wait_s=20)
    assert waited["decision"] == {"behavior": "allow", "answer": "green"}

    opened = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id=agent_id,
        tool_name="ExitPlanMode",
        tool_input={"plan": "1. Drop the users table."},
    )
    plan = phone.locator(f"#approval-{opened['id']}")
    await plan.get_by_label("What to change").fill("keep the users table", timeout=SHOWN_S)
    await plan.get_by_label("What to change").press("Enter")
    waited = await stack.call("approval_wait", id=opened["id"], wait_s=20)
    assert waited["decision"]["behavior"] == "deny", waited
    assert "keep the users table" in waited["decision"]["message"]


async def test_ticks_stay_when_the_stream_tells_the_open_question_again(
    stack: Stack, phone: Page
) -> None:
    """The stream may tell an approval that is still open again: the page keeps its card as
    shown, so what the person ticked or typed there is not wiped by the card drawn afresh."""
    agent_id = stack.agent_id("ticking")
    await open_console(phone, stack)
    approval = await open_question(stack, agent_id, LABELS)
    card = phone.locator(f"#approval-{approval}")
    docs = card.get_by_role("checkbox", name="docs", exact=True)
    await docs.tap(timeout=SHOWN_S)
    await card.get_by_label("Your own answer").fill("docs before lint")
    await expect(docs).to_be_checked()
    view = await Approvals(stack.client, stack.cfg.temporal.task_queue).view(approval)
    assert view is not None and view.open
    console = stack.gateway.console
    assert console is not None
    console.feed.approval(view)  # told again, as the gateway's approvals tell their observers
    # A page's stream keeps its order: once a later approval shows, the repeat was read first.
    later = await open_question(stack, agent_id, ["red", "blue"], question="Which colour?")
    await expect(phone.locator(f"#approval-{later}")).to_be_visible(timeout=SHOWN_S)
    await expect(docs).to_be_checked()
    for label in ("lint", "tests"):
        await expect(card.get_by_role("checkbox", name=label, exact=True)).not_to_be_checked()
    await expect(card.get_by_label("Your own answer")).to_have_value("docs before lint")
    # Decided, the card is drawn afresh: its outcome, no boxes left to tick.
    await stack.call("approval_decide", id=approval, behavior="answer", answer="docs", by="bob")
    await expect(card.locator(".outcome")).to_contain_text("answered 'docs' by", timeout=SHOWN_S)
    await expect(card.get_by_role("checkbox")).to_have_count(0)
