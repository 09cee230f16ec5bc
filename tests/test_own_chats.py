"""A request that acts for an agent gets only what is that agent's own: its mailbox, its events,
and its chats (mapped to it, or where its messages came from). Through the gateway's socket, as
a process that names the agent it acts for (the MCP server does, for a bearer token's agent);
the real python-telegram-bot against Telegram's fake, a real Temporal dev server, real SQLite.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.client import GatewayClient
from agentcomms.errors import GatewayError
from agentcomms.ids import provider_event_id
from gateway.socket.protocol import NOT_YOURS
from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, connected, with_telegram
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually

# B's two group chats; Alice writes in both, once to A by name.
B_GROUP = -200
SHARED_GROUP = -300


@pytest.fixture
async def agents() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"alpha-{suffix}", f"beta-{suffix}"


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    agents: tuple[str, str],
) -> AsyncIterator[Stack]:
    a, b = agents
    channels = {
        f"telegram:{CHAT}": a,
        f"telegram:{B_GROUP}": b,
        f"telegram:{SHARED_GROUP}": b,
    }
    configure = with_telegram(telegram, a, channels=channels)
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as s:
        await connected(s, "telegram")
        yield s


async def refused(client: GatewayClient, method: str, **params: object) -> str:
    with pytest.raises(GatewayError) as caught:
        await client.call(method, **params)
    assert caught.value.code == NOT_YOURS, caught.value
    return str(caught.value)


async def alice_wrote(stack: Stack, agent: str, chat: int, text: str) -> None:
    """Alice writes in `chat`; returns once `agent` has the message."""

    async def arrived() -> bool:
        events = await stack.store.events_after(agent, None, 100)
        return any(e.channel_id == f"telegram:{chat}" and e.text == text for e in events)

    await eventually(arrived, timeout=20)


async def test_an_agent_reads_and_writes_only_its_own_chats(
    stack: Stack, telegram: FakeTelegram, agents: tuple[str, str]
) -> None:
    a, b = agents
    telegram.human_says(CHAT, "hello A")
    await alice_wrote(stack, a, CHAT, "hello A")
    telegram.human_says(B_GROUP, "hello B", user_id=CHAT, chat_type="group")
    await alice_wrote(stack, b, B_GROUP, "hello B")
    # In B's other group Alice names A: that chat is now one A's messages came from.
    telegram.human_says(SHARED_GROUP, f"@{a} look at this", user_id=CHAT, chat_type="group")
    await alice_wrote(stack, a, SHARED_GROUP, "look at this")

    # A stranger writes in A's chat: refused, kept for the human's audit only.
    stranger = telegram.human_says(CHAT, "run this", user_id=999, first_name="Mallory")
    refused_id = provider_event_id("telegram", CHAT, stranger["message"]["message_id"])
    await eventually(lambda: stack.store.get_event(refused_id), timeout=20)

    async with GatewayClient(stack.cfg.server.socket(), caller=a) as as_a:
        # Another agent's chat: neither read nor written, and the error says how to map it.
        error = await refused(as_a, "history", channel_id=f"telegram:{B_GROUP}")
        assert f"telegram:{B_GROUP}" in error and "chat.channels" in error and b in error
        await refused(as_a, "history", channel_id=f"telegram:{B_GROUP}", agent_id=b)
        error = await refused(
            as_a, "reply", channel_id=f"telegram:{B_GROUP}", message="psst", agent_id=a
        )
        assert f'"telegram:{B_GROUP}": "{a}"' in error
        # A chat nobody mapped, or a phone number: refused before any provider is asked.
        await refused(as_a, "reply", channel_id="telegram:777", message="hi", agent_id=a)
        await refused(as_a, "reply", channel_id="sms:+15550001111", message="hi", agent_id=a)
        # As another agent: not in its name, whichever method.
        await refused(as_a, "reply", channel_id=f"telegram:{CHAT}", message="hi", agent_id=b)
        await refused(as_a, "check_messages", agent_id=b)
        await refused(as_a, "events", agent_id=b)
        await refused(as_a, "agent_message", from_agent_id=b, to_agent_id=a, message="hi")
        # What only the human does: typing as the human, the human's inbox, the allowlist.
        human_only: list[tuple[str, dict[str, Any]]] = [
            ("send", {"agent_id": b, "message": "as the human"}),
            ("inbox", {}),
            ("senders", {}),
            ("pair", {"code": "ABCDEF", "confirm": True}),
        ]
        for method, params in human_only:
            assert "not open to agents" in await refused(as_a, method, **params)
        # The terminal's channel holds every agent's talk with the human: only its own side.
        await refused(as_a, "history", channel_id="cli:local")

        # Its own: the mapped chat, and the chat its message came from.
        mine = await as_a.call("history", channel_id=f"telegram:{CHAT}")
        assert [m["payload"]["text"] for m in mine["messages"]] == ["hello A"]
        shared = await as_a.call("history", channel_id=f"telegram:{SHARED_GROUP}")
        assert [m["payload"]["text"] for m in shared["messages"]] == ["look at this"]
        for chat in (CHAT, SHARED_GROUP):
            sent = await as_a.call(
                "reply", channel_id=f"telegram:{chat}", message=f"answer {chat}", agent_id=a
            )
            assert sent["delivered"] is True, sent
        local = await as_a.call("history", channel_id="cli:local", agent_id=a)
        assert local["messages"] == []
        assert (await as_a.call("check_messages", agent_id=a))["agent_id"] == a
        own_events = await as_a.call("events", agent_id=a, rejected=True)
        texts = [e["payload"].get("text") for e in own_events["events"]]
        assert "hello A" in texts and "run this" not in texts

    assert telegram.texts_to(CHAT)[-1] == f"answer {CHAT}"  # after Mallory's pairing code
    assert telegram.texts_to(SHARED_GROUP) == [f"answer {SHARED_GROUP}"]
    assert telegram.texts_to(B_GROUP) == [] and telegram.texts_to(777) == []
    # The human (no caller) still reads any chat.
    everything = await stack.call("history", channel_id=f"telegram:{B_GROUP}")
    assert [m["payload"]["text"] for m in everything["messages"]] == ["hello B"]
    audit = await stack.call("events", agent_id=a)
    assert refused_id in {e["id"] for e in audit["events"]}
