"""Who may answer an approval from a chat: by default every allowed sender in a chat mapped to
the agent; `agents.ID.approvers` narrows that (and names the phones that hear its requests). Anyone else's press changes nothing, is told so,
and is recorded with the strangers (a rejected system event naming why)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import AgentConfig, Config
from agentcomms.config.voice import LOCAL_PHONE
from agentcomms.models import Event
from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, connected, with_telegram
from tests.support.hooks import open_approval, open_question
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually

BOB = 789  # allowed to write to the agent, not one of its approvers
MALLORY = 666  # allowed nothing
ELSEWHERE = 999  # a chat mapped to no agent


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, telegram: FakeTelegram, agent: str
) -> AsyncIterator[Stack]:
    def configure(cfg: Config) -> Config:
        cfg = with_telegram(telegram, agent)(cfg)
        chat = cfg.chat.model_copy(update={"allowed_senders": {"telegram": [str(CHAT), str(BOB)]}})
        approver = AgentConfig(target="nowhere:0.0", approvers=[f"telegram:{CHAT}"])
        return cfg.model_copy(update={"chat": chat, "agents": {agent: approver}})

    telegram.known_chats.update({CHAT, ELSEWHERE})
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as s:
        await connected(s, "telegram")
        yield s


async def _press(telegram: FakeTelegram, message: dict[str, Any], data: str, user: int) -> str:
    before = len(telegram.answered_presses)
    telegram.human_presses(message, data, user_id=user, first_name=f"user{user}")
    await eventually(lambda: len(telegram.answered_presses) > before or None)
    return str(telegram.answered_presses[before]["text"])


async def _refusals(stack: Stack, agent: str) -> list[Event]:
    events = await stack.store.events_after(agent, None, 50)
    return [e for e in events if e.type == "system" and e.status == "rejected"]


async def test_only_the_listed_approver_answering_from_the_agents_chat_decides(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    approval = await open_approval(stack, agent, session=False)
    message = await eventually(lambda: telegram.request_for(approval))
    allow = f"ap:{approval}:a"

    refused = f"Only the agent's approvers may answer {approval}: nothing changed."
    assert await _press(telegram, message, allow, BOB) == refused
    told = await _press(telegram, message, allow, MALLORY)
    assert "Only the agent's allowed senders may answer this" in told
    # The approver, but in a chat that is not the agent's.
    elsewhere = {**message, "chat": {"id": ELSEWHERE, "type": "private", "first_name": "A"}}
    assert await _press(telegram, elsewhere, allow, CHAT) == refused
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}

    reasons = {e.error for e in await _refusals(stack, agent)}
    assert reasons == {
        f"telegram:{BOB} is not one of {agent}'s approvers",
        f"telegram:{ELSEWHERE} is not a chat of {agent}",
        f"sender telegram:{MALLORY} is not allowed",
    }

    assert (
        await _press(telegram, message, allow, CHAT)
        == f"{approval}: allowed by user{CHAT} on Telegram"
    )
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow"}


async def test_only_the_listed_approver_ticks_a_question_that_takes_several_options(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    approval = await open_question(stack, agent, ["lint", "tests"])
    message = await eventually(lambda: telegram.request_for(approval))
    refused = f"Only the agent's approvers may answer {approval}: nothing changed."

    assert "ticked tests" in await _press(telegram, message, f"ap:{approval}:t2", CHAT)
    assert await _press(telegram, message, f"ap:{approval}:t1", BOB) == refused
    assert await _press(telegram, message, f"ap:{approval}:u2", BOB) == refused
    assert await _press(telegram, message, f"ap:{approval}:done", BOB) == refused
    labels = [b["text"] for row in message["reply_markup"]["inline_keyboard"] for b in row]
    assert labels == ["☐ lint", "☑ tests", "Done"] and len(telegram.markup_edits) == 1
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}
    recorded = [(e.payload["text"], e.error) for e in await _refusals(stack, agent)]
    not_approver = f"telegram:{BOB} is not one of {agent}'s approvers"
    assert sorted(recorded) == sorted(
        (f"pressed {what} on approval {approval}", not_approver)
        for what in ("tick lint", "untick tests", "Done")
    )

    await _press(telegram, message, f"ap:{approval}:done", CHAT)
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "answer": "tests"}


def test_approvers_are_checked_when_the_config_is_read() -> None:
    with pytest.raises(ValidationError, match="'telegrm:456' is not an approver: expected"):
        AgentConfig(target="dev:0.1", approvers=["telegrm:456"])
    with pytest.raises(ValidationError, match="'sms' is not an approver"):
        AgentConfig(target="dev:0.1", approvers=["sms"])
    assert AgentConfig(target="dev:0.1", approvers=[]).approvers == []


def test_phone_approvers_are_checked_when_the_config_is_read() -> None:
    for wrong in ("phone:5551234567", "phone:", "phone", "phone:+1555123456789012"):
        with pytest.raises(ValidationError, match=re.escape(f"'{wrong}' is not a phone")):
            AgentConfig(target="dev:0.1", approvers=[wrong])
    listed = ["phone:+15551234567", "phone:local", "telegram:456"]
    assert AgentConfig(target="dev:0.1", approvers=listed).approvers == listed


HUMAN_PHONE = "+15551234567"
OTHER_PHONE = "+15557654321"
# An agent's approvers, then which phones hear and answer its requests: the caller's number
# (or the number the ladder rings), and the local phone.
PHONE_HEARS: list[tuple[list[str] | None, dict[str, bool]]] = [
    (None, {HUMAN_PHONE: True, OTHER_PHONE: True, LOCAL_PHONE: True}),
    ([], {HUMAN_PHONE: False, OTHER_PHONE: False, LOCAL_PHONE: False}),
    ([f"sms:{HUMAN_PHONE}", "telegram:456"], {HUMAN_PHONE: False, LOCAL_PHONE: False}),
    ([f"phone:{HUMAN_PHONE}"], {HUMAN_PHONE: True, OTHER_PHONE: False, LOCAL_PHONE: False}),
    (["phone:local"], {HUMAN_PHONE: False, LOCAL_PHONE: True}),
]


@pytest.mark.parametrize(("approvers", "hears"), PHONE_HEARS)
def test_a_phone_hears_the_requests_of_agents_that_list_it_or_list_no_one(
    approvers: list[str] | None, hears: dict[str, bool]
) -> None:
    cfg = Config(agents={"backend": AgentConfig(target="dev:0.1", approvers=approvers)})
    assert {phone: cfg.phone_hears("backend", phone) for phone in hears} == hears
    # An agent the config does not name has no approvers: every phone hears it.
    assert cfg.phone_hears("elsewhere", OTHER_PHONE)
