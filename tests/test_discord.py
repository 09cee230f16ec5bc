"""Discord end to end: the real discord.py against a local Discord (REST and gateway WebSocket,
tests/fakes), our gateway, worker and outbox on a real Temporal dev server, real tmux panes,
real SQLite."""

from __future__ import annotations

import gc
import re
from pathlib import Path
from typing import Any

import discord as discord_py
import pytest
from fastmcp import Client
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, DiscordConfig
from agentcomms.errors import ChatProviderUnavailable, RateLimited, SendError, SendRefused
from agentcomms.ids import provider_event_id
from agentcomms.transports import InboundMessage, InboundResult, LinkStatus
from agentcomms.transports import discord as transport
from gateway.service import Gateway
from mcp_server import build_server
from tests.fakes.discord import DIRECT_MESSAGES, GUILD_MESSAGES, MESSAGE_CONTENT, SEND, FakeDiscord
from tests.support.chat import (
    DISCORD_ALICE,
    connected,
    provider_is,
    provider_status,
    with_discord,
)
from tests.support.sinks import TakesNoPresses
from tests.support.stack import Stack, recording_pane, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually, typed

ALICE = DISCORD_ALICE  # the allowed human (the fake's default author)
LOGIN = "GET /users/@me"


def configured(fake: FakeDiscord, **extra: Any) -> Config:
    """A configuration with Discord on the fake, for the transport on its own."""
    return with_discord(fake, "backend", **extra)(Config())


@pytest.fixture
def stack(discord_stack: Stack) -> Stack:
    return discord_stack


async def with_pane(stack: Stack, agent: str, tmux: Tmux, tmp_path: Path, **extra: Any) -> Path:
    out = await recording_pane(stack, agent, tmux, tmp_path, **extra)
    await connected(stack, "discord")
    return out


def line(channel: int | str, text: str, name: str = "Alice") -> bytes:
    return f"[discord:{channel} from {name}] {text}\r".encode()


async def test_a_message_from_discord_is_typed_into_the_agent_pane_with_receipts(
    stack: Stack, discord: FakeDiscord, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    out = await with_pane(stack, agent, tmux, tmp_path)
    # The bot asked for what it needs to read people's messages, content included.
    wanted = GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT
    assert discord.identifies[-1]["intents"] & wanted == wanted

    message = discord.human_says(discord.general, "deploy to staging?\nthanks")

    await typed(out, line(discord.general, "deploy to staging?\n| thanks"))
    event = await stack.store.get_event(
        provider_event_id("discord", discord.general, message["id"])
    )
    assert event is not None and event.agent_id == agent
    assert event.channel_id == f"discord:{discord.general}"
    assert event.payload["text"] == "deploy to staging?\nthanks"
    assert event.payload["sender_id"] == str(ALICE) and event.payload["sender_name"] == "Alice"
    assert event.payload["chat_type"] == "guild"
    # Receipts: 👀 once queued; once typed, ✍️ takes its place.
    await eventually(lambda: len(discord.reactions) == 3)
    assert [(r["action"], r["emoji"]) for r in discord.reactions] == [
        ("add", "👀"),
        ("add", "✍️"),
        ("remove", "👀"),
    ]
    assert {r["message_id"] for r in discord.reactions} == {int(message["id"])}


async def test_when_max_chars_cuts_the_text_the_typed_receipt_says_so_in_a_reply(
    stack: Stack, discord: FakeDiscord, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    await with_pane(stack, agent, tmux, tmp_path, max_chars=100)

    message = discord.human_says(discord.general, "y" * 300)

    [note] = await eventually(lambda: discord.sent)
    assert "cut at the agent's max_chars (100)" in note["content"], note
    assert note["message_reference"]["message_id"] == message["id"]
    assert [r["emoji"] for r in discord.reactions if r["action"] == "add"] == ["👀", "✍️"]


async def test_the_same_message_create_delivered_twice_is_one_event_typed_once(
    stack: Stack, discord: FakeDiscord, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    out = await with_pane(stack, agent, tmux, tmp_path)

    first = discord.human_says(discord.general, "once")
    await typed(out, line(discord.general, "once"))
    discord.deliver(first)  # Discord dispatches it again
    discord.deliver(first)
    discord.human_says(discord.general, "after")

    await typed(out, line(discord.general, "once") + line(discord.general, "after"))
    events = await stack.store.events_after(agent, None, 100)
    assert [e.payload["text"] for e in events] == ["once", "after"]


async def test_own_and_bots_messages_and_other_servers_are_ignored_direct_messages_taken(
    temporal_env: WorkflowEnvironment, tmp_path: Path, discord: FakeDiscord, agent: str, tmux: Tmux
) -> None:
    elsewhere = discord.text_channel(guild_id=9990009)  # a server the bot is also in
    private = discord.dm_channel(ALICE)
    configure = with_discord(discord, agent, elsewhere, private)
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        out = await with_pane(stack, agent, tmux, tmp_path)

        ignored = [
            discord.bot_says(discord.general, "the bot's own words"),
            discord.human_says(discord.general, "beep", user_id=555, name="CI", bot=True),
            discord.human_says(elsewhere, "from another server"),
        ]
        discord.human_says(private, "in private")
        discord.human_says(discord.general, "last")

        await typed(out, line(private, "in private") + line(discord.general, "last"))
        events = await stack.store.events_after(agent, None, 100)
        assert [e.payload["text"] for e in events] == ["in private", "last"]
        assert events[0].payload["chat_type"] == "dm"
        for message in ignored:  # not even recorded as rejected, and nobody was answered
            event_id = provider_event_id("discord", message["channel_id"], message["id"])
            assert await stack.store.get_event(event_id) is None
        assert discord.sent == []

        # A direct message in a chat nobody mapped is answered with the id to map.
        unmapped = discord.dm_channel(ALICE)
        discord.human_says(unmapped, "hello?")
        [answer] = await eventually(lambda: discord.texts_to(unmapped))
        assert f'"discord:{unmapped}": "backend"' in answer


async def test_a_stranger_is_rejected_and_recorded_until_paired(
    stack: Stack, discord: FakeDiscord, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    out = await with_pane(stack, agent, tmux, tmp_path)

    first = discord.human_says(discord.general, "let me in", user_id=999, name="Mallory")
    [answer] = await eventually(lambda: discord.sent)
    code = re.search(r"agentcomms pair (\w+)", answer["content"])
    assert code, answer
    # The answer refers to the stranger's message, and pings no one.
    assert answer["message_reference"]["message_id"] == first["id"]
    assert answer["allowed_mentions"]["parse"] == []
    rejected = await stack.store.get_event(
        provider_event_id("discord", discord.general, first["id"])
    )
    assert rejected is not None and rejected.status == "rejected"
    assert rejected.payload["text"] == "let me in" and rejected.payload["sender_id"] == "999"
    assert (await stack.call("check_messages", agent_id=agent))["messages"] == []

    paired = await stack.call("pair", code=code[1], confirm=True)
    assert paired["provider"] == "discord" and paired["sender_id"] == "999"
    # What they wrote while waiting reaches the agent now, and the chat is told.
    await typed(out, line(discord.general, "let me in", "Mallory"))
    told = await eventually(lambda: discord.sent[1:])
    assert "You are admitted" in told[0]["content"]
    discord.human_says(discord.general, "thanks", user_id=999, name="Mallory")
    await typed(
        out,
        line(discord.general, "let me in", "Mallory") + line(discord.general, "thanks", "Mallory"),
    )
    assert len(discord.sent) == 2  # no second pairing answer


async def test_reply_and_send_message_arrive_as_references_split_at_2000_characters(
    stack: Stack, discord: FakeDiscord, agent: str
) -> None:
    await connected(stack, "discord")
    asked = discord.human_says(discord.general, "what changed?")
    long = "\n".join(f"line {i:04d}: something changed" for i in range(100))  # ~3,000 chars

    result = await stack.call(
        "reply",
        channel_id=f"discord:{discord.general}",
        message=long,
        agent_id=agent,
        reply_to=asked["id"],
    )

    assert result["delivered"] is True and result["status"] == "delivered", result
    first, second = [m for m in discord.sent if m["author"]["bot"]]
    assert first["content"] + second["content"] == long
    assert len(first["content"]) <= 2000 and first["content"].endswith("\n")
    assert first["message_reference"]["message_id"] == asked["id"]
    assert "message_reference" not in second
    assert result["message_id"] == second["id"]

    mcp = build_server(stack.cfg.server.socket(), default_agent=agent)
    async with Client(mcp) as client:
        sent = await client.call_tool(
            "send_message",
            {"provider": "discord", "chat_id": str(discord.general), "message": "@everyone done"},
        )
    assert sent.structured_content["success"] is True, sent.structured_content
    assert discord.texts_to(discord.general)[-1] == "@everyone done"
    assert discord.sent[-1]["allowed_mentions"]["parse"] == []  # an agent pings no one
    history = await stack.call("history", channel_id=f"discord:{discord.general}", limit=10)
    texts = [m["payload"]["text"] for m in history["messages"]]  # both directions
    assert "what changed?" in texts
    assert [t for t in texts if t != "what changed?"] == [long, "@everyone done"]


async def test_a_send_goes_out_after_429_and_500_honouring_retry_after(
    stack: Stack, discord: FakeDiscord, agent: str
) -> None:
    await connected(stack, "discord")
    discord.fail_next(SEND, 429, 500, retry_after=1.0)

    result = await stack.call(
        "reply", channel_id=f"discord:{discord.general}", message="done", agent_id=agent
    )

    assert result["delivered"] is True and result["status"] == "delivered", result
    assert discord.texts_to(discord.general) == ["done"]
    attempts = [t for t, route in discord.requests if route == SEND]
    assert len(attempts) == 3
    assert attempts[1] - attempts[0] >= 0.9  # Discord's retry_after was waited out


async def test_a_permanent_refusal_fails_at_once_saying_what_to_fix(
    stack: Stack, discord: FakeDiscord, agent: str
) -> None:
    await connected(stack, "discord")
    unknown = await stack.call("reply", channel_id="discord:555", message="hi", agent_id=agent)
    discord.forbidden.add(discord.general)
    barred = await stack.call(
        "reply", channel_id=f"discord:{discord.general}", message="hi", agent_id=agent
    )

    assert unknown["status"] == "failed" and "does not know channel 555" in unknown["error"]
    assert barred["status"] == "failed" and "Send Messages" in barred["error"], barred
    assert discord.count(SEND) == 2  # one try each
    event = await stack.store.get_event(unknown["event_id"])
    assert event is not None and event.status == "failed"


async def test_discord_down_for_a_while_then_back_resumes_and_loses_nothing(
    stack: Stack, discord: FakeDiscord, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    out = await with_pane(stack, agent, tmux, tmp_path)

    await discord.stop()
    await eventually(lambda: provider_is(stack, "discord", "reconnecting"), timeout=30)
    await eventually(lambda: _error_says(stack, "could not reach Discord"), timeout=30)
    channels = (await stack.call("channels"))["channels"]
    mine = next(c for c in channels if c["channel_id"] == f"discord:{discord.general}")
    assert mine["status"] == "reconnecting"
    reply = await stack.call(
        "reply",
        channel_id=f"discord:{discord.general}",
        message="are you there?",
        agent_id=agent,
        timeout=1,
    )
    assert reply["status"] == "queued" and reply["delivered"] is False
    # Written while the bot was away: Discord keeps it for the session it resumes.
    discord.human_says(discord.general, "written while the bot was away")

    await discord.start()
    await connected(stack, "discord")
    assert discord.resumes and len(discord.identifies) == 1  # resumed, not a new session
    await typed(out, line(discord.general, "written while the bot was away"), timeout=60)
    await eventually(lambda: discord.texts_to(discord.general) == ["are you there?"], timeout=60)


async def test_a_restarted_gateway_reads_what_was_written_while_it_was_down(
    stack: Stack, discord: FakeDiscord, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    out = await with_pane(stack, agent, tmux, tmp_path)
    discord.human_says(discord.general, "before")
    await typed(out, line(discord.general, "before"))

    await stack.gateway.close()
    # The old session is gone with the gateway: Discord replays nothing to a new one.
    discord.human_says(discord.general, "while the gateway was down")
    discord.human_says(discord.general, "sorry, one more", user_id=999, name="Mallory")
    restarted = Gateway(stack.cfg, stack.client, stack.store, host=stack.host)
    await restarted.start()
    try:
        await typed(
            out,
            line(discord.general, "before") + line(discord.general, "while the gateway was down"),
            timeout=30,
        )
        assert len(discord.identifies) == 2 and not discord.resumes
        [answer] = await eventually(lambda: discord.sent)  # the stranger's, after the record
        assert "agentcomms pair" in answer["content"]
        events = await stack.store.events_after(agent, None, 100)
        assert [e.payload["text"] for e in events if e.status != "rejected"] == [
            "before",
            "while the gateway was down",
        ]
        # The stranger written to meanwhile is recorded and answered like any other.
        assert [e.payload["text"] for e in events if e.status == "rejected"] == ["sorry, one more"]
    finally:
        await restarted.close()


async def _error_says(stack: Stack, words: str) -> bool:
    return words in ((await provider_status(stack, "discord")).get("error") or "")


# ---- the transport on its own: what Discord's refusals become ------------------------------------


class Keep(TakesNoPresses):
    """A sink that keeps everything (the gateway's chat inbox, without Temporal)."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []

    async def accept(self, message: InboundMessage) -> InboundResult:
        self.messages.append(message)
        return InboundResult("queued")


async def test_one_worker_logs_in_to_discord_once_and_logs_out_when_it_stops(
    temporal_env: WorkflowEnvironment, tmp_path: Path, discord: FakeDiscord, agent: str, tmux: Tmux
) -> None:
    # Clients another test of this process left for the collector are not this one's.
    before = {id(o) for o in _open_clients()}
    async with running_stack(
        temporal_env.client, tmp_path, configure=with_discord(discord, agent)
    ) as stack:
        out = await with_pane(stack, agent, tmux, tmp_path)
        logins_by_the_gateway = discord.count(LOGIN)
        channel = f"discord:{discord.general}"
        for text in ("first", "second"):
            result = await stack.call("reply", channel_id=channel, message=text, agent_id=agent)
            assert result["status"] == "delivered", result
        discord.human_says(discord.general, "thanks")
        await typed(out, line(discord.general, "thanks"))
        await eventually(lambda: len(discord.reactions) == 3)  # 👀, then ✍️ in its place

        # Two replies and two receipts, one login by the worker (the gateway's bot has its own).
        assert discord.count(LOGIN) - logins_by_the_gateway == 1
        assert discord.count("GET /oauth2/applications/@me") == discord.count(LOGIN)
        assert discord.count(SEND) == 2
    # The stack's workers stopped, and the sender's client was closed with them: one left open
    # keeps its HTTP session, and warns "Unclosed client session" whenever it is collected.
    gc.collect()
    left_open = [o for o in _open_clients() if id(o) not in before]
    assert left_open == []


def _open_clients() -> list[discord_py.Client]:
    return [
        o
        for o in gc.get_objects()
        # The sender's own client (the gateway's bot is a subclass), compared by identity: the
        # workflow sandbox's proxies refuse isinstance's questions.
        if type(o) is discord_py.Client and not o.is_closed()
    ]


async def test_send_errors_say_whether_to_wait_retry_or_fix(discord: FakeDiscord) -> None:
    sender = transport.sender(configured(discord))
    try:
        await _send_errors(discord, sender)
    finally:
        await sender.close()


async def _send_errors(discord: FakeDiscord, sender: transport.DiscordSender) -> None:
    channel = str(discord.general)

    discord.fail_next(SEND, 429, retry_after=60.0)  # longer than discord.py waits itself
    with pytest.raises(RateLimited) as limited:
        await sender.send_text(channel, "hi")
    assert limited.value.retry_after == pytest.approx(60.0, abs=1)

    with pytest.raises(SendRefused, match="Copy Channel ID"):
        await sender.send_text("general", "hi")
    with pytest.raises(SendRefused, match="does not know channel 555"):
        await sender.receipt("555", "1", "queued")

    bad = configured(discord)
    bad.chat.discord.token = SecretStr("not-the-token")
    refusing = transport.sender(bad)
    with pytest.raises(SendRefused, match=r"chat\.discord\.token") as refused:
        await refusing.send_text(channel, "hi")
    await refusing.close()
    assert "not-the-token" not in str(refused.value)

    await discord.stop()
    with pytest.raises(ChatProviderUnavailable, match="did not answer"):
        await sender.send_text(channel, "hi")
    assert all(isinstance(e, SendError) for e in (limited.value, refused.value))


async def _receiver_status(cfg: Config) -> LinkStatus:
    receiver = transport.receiver(cfg, Keep())
    await receiver.start()
    try:
        await eventually(lambda: receiver.status.state == "failed", timeout=10)
        return receiver.status
    finally:
        await receiver.close()


async def test_a_refused_token_or_intent_fails_the_link_saying_what_to_fix(
    discord: FakeDiscord,
) -> None:
    bad = configured(discord)
    bad.chat.discord.token = SecretStr("not-the-token")
    status = await _receiver_status(bad)
    assert "chat.discord.token" in (status.error or "")
    assert "not-the-token" not in (status.error or "")

    discord.privileged_intents_enabled = False  # the portal's Message Content switch is off
    status = await _receiver_status(configured(discord))
    assert "Message Content Intent" in (status.error or ""), status


def test_a_guild_id_may_be_written_as_a_number_or_text() -> None:
    assert DiscordConfig(guild_id=1110001000111000111).guild_id == "1110001000111000111"
    assert DiscordConfig(guild_id="42").guild_id == "42"
    with pytest.raises(ValueError):
        DiscordConfig(guild_id="my server")
