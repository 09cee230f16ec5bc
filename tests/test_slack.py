"""Slack end to end over Socket Mode: the real slack_sdk (its Socket Mode client and Web API
client) against a local Slack (tests/fakes), our gateway, worker and outbox on a real Temporal
dev server, real tmux panes, real SQLite. One stack for the module; each test its own pane."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, STTConfig, VoiceConfig
from agentcomms.errors import (
    AttachmentRefused,
    ChatProviderUnavailable,
    RateLimited,
    SendRefused,
)
from agentcomms.ids import provider_event_id
from agentcomms.transports import InboundMessage, InboundResult, LinkStatus
from agentcomms.transports import slack as transport
from agentcomms.transports._slack_events import inbound
from gateway.chat.attachments import FOLDER
from gateway.chat.strangers import (
    PAIRING_REPLIES_PER_HOUR,
    STRANGER_ROWS_PER_HOUR,
    STRANGER_TEXT_MAX,
)
from mcp_server import build_server
from tests.fakes.slack import ALICE, FakeSlack
from tests.support.chat import connected, with_slack
from tests.support.mcp import call
from tests.support.sinks import TakesNoPresses
from tests.support.stack import Stack, recording_pane, running_stack
from tests.support.tmux import Tmux
from tests.support.voice import voice_note, write_grammar
from tests.support.waiting import eventually, typed

AGENT = "slack-backend"
PHRASES = ["ship it on friday", "run the tests"]
STRANGERS = 300
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"


@pytest.fixture(scope="module")
async def slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture(scope="module")
def dm(slack: FakeSlack) -> str:
    """Alice's direct messages with the app, mapped to the agent too."""
    return slack.dm_channel()


@pytest.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment,
    tmp_path_factory: pytest.TempPathFactory,
    slack: FakeSlack,
    dm: str,
) -> AsyncIterator[Stack]:
    tmp = tmp_path_factory.mktemp("slack")
    # Voice clips heard offline, within a grammar.
    voice = VoiceConfig(
        audio_dir=tmp / "audio", stt=STTConfig(grammar=write_grammar(tmp / "g.gram", PHRASES))
    )
    configure = with_slack(slack, AGENT, dm)
    async with running_stack(temporal_env.client, tmp, voice=voice, configure=configure) as s:
        await connected(s, "slack")
        yield s


async def pane(stack: Stack, tmux: Tmux, tmp_path: Path) -> Path:
    return await recording_pane(stack, AGENT, tmux, tmp_path)


def line(channel: str, text: str, name: str = "Alice") -> bytes:
    return f"[slack:{channel} from {name}] {text}\r".encode()


async def test_a_message_is_typed_with_its_header_receipts_are_reactions_replies_go_in_its_thread(
    stack: Stack, slack: FakeSlack, tmux: Tmux, tmp_path: Path
) -> None:
    out = await pane(stack, tmux, tmp_path)
    # Slack's markup reads as the person wrote it: a mention, a link, an escaped bracket.
    said = slack.human_says(slack.general, "ask <@U0BOB> &lt;now&gt;\nsee <https://x.test|docs>")

    await typed(out, line(slack.general, "ask @U0BOB <now>\n| see docs (https://x.test)"))
    event = await stack.store.get_event(provider_event_id("slack", slack.general, said["ts"]))
    assert event is not None and event.agent_id == AGENT
    assert event.channel_id == f"slack:{slack.general}"
    assert (event.payload["sender_id"], event.payload["sender_name"]) == (ALICE, "Alice")
    assert event.payload["chat_type"] == "channel"
    # Receipts: 👀 once queued; once typed, ✍ takes its place.
    await eventually(lambda: len(slack.reactions) >= 3)
    assert [(r["action"], r["name"], r["timestamp"]) for r in slack.reactions[-3:]] == [
        ("add", "eyes", said["ts"]),
        ("add", "writing_hand", said["ts"]),
        ("remove", "eyes", said["ts"]),
    ]

    # The agent's answer goes into the thread of the message it answers, shown as written.
    result = await stack.call(
        "reply",
        channel_id=f"slack:{slack.general}",
        message="<!channel> done & dusted",
        agent_id=AGENT,
        reply_to=said["ts"],
    )
    assert result["status"] == "delivered", result
    sent = slack.sent[-1]
    assert (sent["thread_ts"], sent["mrkdwn"]) == (said["ts"], False)
    assert sent["text"] == "&lt;!channel&gt; done &amp; dusted"  # pings no one


async def test_a_reply_in_a_thread_and_a_direct_message_are_typed_and_answered_where_they_were(
    stack: Stack, slack: FakeSlack, dm: str, tmux: Tmux, tmp_path: Path
) -> None:
    out = await pane(stack, tmux, tmp_path)
    root = slack.human_says(slack.general, "start")
    reply = slack.human_says(slack.general, "in the thread", thread_ts=root["ts"])
    private = slack.human_says(dm, "in private")

    await typed(
        out,
        line(slack.general, "start")
        + line(slack.general, "in the thread")
        + line(dm, "in private"),
    )
    ref = f"{reply['ts']}~{root['ts']}"
    event = await stack.store.get_event(provider_event_id("slack", slack.general, ref))
    assert event is not None and event.payload["reply_to"] == root["ts"]
    assert (await stack.store.get_event(provider_event_id("slack", dm, private["ts"]))) is not None
    # The thread reply's receipt is on the reply; the answer to it goes into its thread.
    await eventually(lambda: any(r["timestamp"] == reply["ts"] for r in slack.reactions))
    answered = await stack.call(
        "reply", channel_id=f"slack:{slack.general}", message="ok", agent_id=AGENT, reply_to=ref
    )
    assert answered["status"] == "delivered", answered
    assert slack.sent[-1]["thread_ts"] == root["ts"]


async def test_bots_edits_and_the_apps_own_words_reach_no_one_and_a_retried_event_is_one(
    stack: Stack, slack: FakeSlack, tmux: Tmux, tmp_path: Path
) -> None:
    out = await pane(stack, tmux, tmp_path)
    ignored = [
        slack.message(slack.general, "the app's own", user=slack.bot_user),
        slack.message(slack.general, "a bot", bot_id="B0OTHER"),
        slack.message(slack.general, "edited", subtype="message_changed"),
        slack.message(slack.general, "joined", subtype="channel_join"),
    ]
    for event in ignored:
        slack.push("events_api", slack.event_callback(event))
    once = slack.message(slack.general, "once")
    envelope = slack.event_callback(once)
    first = slack.push("events_api", envelope)
    slack.push("events_api", envelope)  # Slack sends it again (no ack in time, a retry)
    slack.human_says(slack.general, "last")

    await typed(out, line(slack.general, "once") + line(slack.general, "last"))
    for event in ignored:
        assert (
            await stack.store.get_event(provider_event_id("slack", slack.general, event["ts"]))
            is None
        )
    # Acknowledged only once kept, each envelope; the ignored ones too (nothing to keep).
    await eventually(lambda: first in slack.acks)


async def test_a_stranger_is_refused_in_the_thread_and_recorded_until_paired(
    stack: Stack, slack: FakeSlack, tmux: Tmux, tmp_path: Path
) -> None:
    out = await pane(stack, tmux, tmp_path)
    before = len(slack.sent)
    first = slack.human_says(slack.general, "let me in", user="U0MALLORY", name="Mallory")

    [answer] = await eventually(lambda: slack.sent[before:])
    code = re.search(r"agentcomms pair (\w+)", answer["text"])
    assert code, answer
    assert answer["thread_ts"] == first["ts"]
    rejected = await stack.store.get_event(provider_event_id("slack", slack.general, first["ts"]))
    assert rejected is not None and rejected.status == "rejected"

    paired = await stack.call("pair", code=code[1], confirm=True)
    assert (paired["provider"], paired["sender_id"]) == ("slack", "U0MALLORY")
    await typed(out, line(slack.general, "let me in", "Mallory"))


async def test_the_agents_mcp_tools_send_read_and_list_slack(
    stack: Stack, slack: FakeSlack, tmux: Tmux, tmp_path: Path
) -> None:
    out = await pane(stack, tmux, tmp_path)
    mcp = build_server(stack.cfg.server.socket(), default_agent=AGENT)
    asked = slack.human_says(slack.general, "what changed?")
    await typed(out, line(slack.general, "what changed?"))

    sent = await call(
        mcp,
        "send_message",
        provider="slack",
        chat_id=slack.general,
        message="all of it",
        reply_to=asked["ts"],
    )
    assert sent["success"] is True, sent
    assert (slack.sent[-1]["text"], slack.sent[-1]["thread_ts"]) == ("all of it", asked["ts"])
    read = await call(mcp, "get_messages", provider="slack", chat_id=slack.general, limit=10)
    contents = [m["content"] for m in read["messages"]]
    assert "what changed?" in contents and "all of it" in contents
    listed = await call(mcp, "list_channels")
    assert {"provider_name": "slack", "status": "connected"} in [
        {k: c[k] for k in ("provider_name", "status")} for c in listed["channels"]
    ]


async def test_an_unmapped_channel_is_told_the_id_to_map(stack: Stack, slack: FakeSlack) -> None:
    elsewhere = slack.dm_channel()
    asked = slack.human_says(elsewhere, "hello?")
    [answer] = await eventually(lambda: [m for m in slack.sent if m["channel"] == elsewhere])
    assert f'"slack:{elsewhere}": "backend"' in answer["text"].replace("&quot;", '"')
    assert answer["thread_ts"] == asked["ts"]


async def test_a_dropped_socket_is_opened_again_and_the_unacknowledged_is_sent_again(
    stack: Stack, slack: FakeSlack, tmux: Tmux, tmp_path: Path
) -> None:
    out = await pane(stack, tmux, tmp_path)
    before = slack.connections
    await slack.drop_socket()
    slack.human_says(slack.general, "while the socket was away")
    await eventually(lambda: slack.connections > before, timeout=30)
    await connected(stack, "slack")
    await typed(out, line(slack.general, "while the socket was away"), timeout=30)


async def test_a_voice_clip_is_fetched_with_the_bot_token_heard_and_typed_a_strangers_never(
    stack: Stack, slack: FakeSlack, tmux: Tmux, tmp_path: Path
) -> None:
    out = await pane(stack, tmux, tmp_path)
    clip = await voice_note("run the tests")
    strangers = slack.human_sends_clip(slack.general, clip, user="U0EVE", name="Eve")
    alices = slack.human_sends_clip(slack.general, clip)

    await typed(
        out,
        f"[slack:{slack.general} from Alice, voice note transcribed] run the tests\r".encode(),
        timeout=60,
    )
    event = await stack.store.get_event(provider_event_id("slack", slack.general, alices["ts"]))
    assert event is not None and event.payload["transcribed"] is True
    assert slack.downloads == [alices["files"][0]["id"]]  # the stranger's was never fetched
    rejected = await stack.store.get_event(
        provider_event_id("slack", slack.general, strangers["ts"])
    )
    assert rejected is not None and rejected.status == "rejected"


async def test_a_file_from_alice_is_saved_in_the_agents_folder_and_the_agent_shares_one_back(
    stack: Stack, slack: FakeSlack, tmux: Tmux, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    out = await recording_pane(stack, AGENT, tmux, tmp_path, folder=work)
    fetched_before = len(slack.downloads)
    # A stranger's file is never fetched.
    strangers = slack.human_sends_file(slack.general, "run.sh", b"#!/bin/sh\n", user="U0EVE")
    alices = slack.human_sends_file(
        slack.general, "spec.pdf", PDF, text="read this", mimetype="application/pdf"
    )
    event_id = provider_event_id("slack", slack.general, alices["ts"])
    saved = work / FOLDER / f"{event_id}-spec.pdf"

    await typed(out, line(slack.general, f"[document: {saved}]\n| read this"))
    assert saved.read_bytes() == PDF
    assert slack.downloads[fetched_before:] == [alices["files"][0]["id"]]
    rejected = await stack.store.get_event(
        provider_event_id("slack", slack.general, strangers["ts"])
    )
    assert rejected is not None and rejected.status == "rejected"

    # The agent answers in the thread, with a file of its folder shared there after the text.
    (work / "report.txt").write_text("all green\n")
    mcp = build_server(stack.cfg.server.socket(), default_agent=AGENT)
    sent = await call(
        mcp,
        "send_message",
        provider="slack",
        chat_id=slack.general,
        message="see the report",
        reply_to=alices["ts"],
        files=["report.txt"],
    )
    assert sent["success"] is True, sent
    assert (slack.sent[-1]["text"], slack.sent[-1]["thread_ts"]) == ("see the report", alices["ts"])
    shared = slack.shared[-1]
    assert (shared["name"], shared["data"]) == ("report.txt", b"all green\n")
    assert (shared["channel"], shared["thread_ts"]) == (slack.general, alices["ts"])


async def test_a_flood_of_strangers_costs_a_bounded_number_of_rows_and_answers(
    stack: Stack, slack: FakeSlack, tmux: Tmux, tmp_path: Path
) -> None:
    out = await pane(stack, tmux, tmp_path)
    unmapped = "C0ELSEWHERE"  # a channel the app was invited to, mapped to no agent
    slack.known.add(unmapped)
    answered_before = len(slack.texts_to(slack.general))
    for n in range(STRANGERS):
        slack.human_says(slack.general, "x" * 4_000, user=f"U0S{n:04d}", name=f"s{n}")
        if n % 10 == 0:
            slack.human_says(unmapped, "spam", user=f"U0S{n:04d}", name=f"s{n}")
    slack.human_says(slack.general, "deploy")
    posted = time.monotonic()

    # Alice wrote after all of them, in the same channel: typed once they are handled.
    await typed(out, line(slack.general, "deploy"), timeout=90)
    print(f"Alice typed {time.monotonic() - posted:.1f} s after {STRANGERS} strangers")
    events = await stack.store.events_after(AGENT, None, 1_000)
    rejected = [e for e in events if e.status == "rejected"]
    assert len(rejected) <= STRANGER_ROWS_PER_HOUR
    assert all(len(e.payload["text"]) <= STRANGER_TEXT_MAX for e in rejected)
    answers = slack.texts_to(slack.general)[answered_before:]
    assert 0 < len(answers) <= PAIRING_REPLIES_PER_HOUR
    # The unmapped channel is not the operator's: nothing recorded, nothing answered.
    assert slack.texts_to(unmapped) == []
    assert await stack.store.events_after("default", None, 1_000) == []


# ---- the transport on its own --------------------------------------------------------------------


@pytest.fixture
async def lone() -> AsyncIterator[FakeSlack]:
    """A Slack of the test's own: the module's is the stack's, whose socket it must keep."""
    fake = FakeSlack()
    await fake.start()
    yield fake
    await fake.stop()


class Keep(TakesNoPresses):
    """A sink that keeps everything (the gateway's chat inbox, without Temporal)."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []

    async def accept(self, message: InboundMessage) -> InboundResult:
        self.messages.append(message)
        return InboundResult("queued")


class KeptOnTheThirdTry(Keep):
    """The gateway's inbox while Temporal is away: the first two tries keep nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.tries = 0

    async def accept(self, message: InboundMessage) -> InboundResult:
        self.tries += 1
        if self.tries < 3:
            raise ConnectionError("Temporal is away")
        return await super().accept(message)


async def test_a_message_not_kept_is_tried_until_kept_and_only_then_acknowledged(
    lone: FakeSlack,
) -> None:
    slack = lone
    sink = KeptOnTheThirdTry()
    receiver = transport.receiver(configured(slack), sink)
    await receiver.start()
    try:
        await eventually(lambda: receiver.status.state == "connected", timeout=10)
        envelope = slack.push("events_api", slack.event_callback(slack.message(slack.general, "1")))
        then = slack.push("events_api", slack.event_callback(slack.message(slack.general, "2")))
        await eventually(lambda: then in slack.acks, timeout=20)
        assert [m.text for m in sink.messages] == ["1", "2"]  # in order, each kept once
        assert sink.tries == 4 and envelope in slack.acks
    finally:
        await receiver.close()


def configured(fake: FakeSlack, **extra: Any) -> Config:
    return with_slack(fake, AGENT, **extra)(Config())


async def test_send_errors_say_whether_to_wait_retry_or_fix(lone: FakeSlack) -> None:
    slack = lone
    sender = transport.sender(configured(slack))
    slack.fail_next("chat.postMessage", "ratelimited")
    with pytest.raises(RateLimited) as limited:
        await sender.send_text(slack.general, "hi")
    assert limited.value.retry_after == 1.0
    with pytest.raises(SendRefused, match="/invite"):
        await sender.send_text("C0NOWHERE", "hi")
    slack.fail_next("chat.postMessage", "fatal_error")
    with pytest.raises(ChatProviderUnavailable):
        await sender.send_text(slack.general, "hi")
    slack.scopes.discard("reactions:write")
    slack.fail_next("reactions.add", "missing_scope")
    with pytest.raises(SendRefused, match="scope"):
        await sender.receipt(slack.general, "1.000001", "queued")
    slack.scopes.add("reactions:write")

    bad = configured(slack)
    bad.chat.slack.bot_token = SecretStr("xoxb-not-the-token")
    with pytest.raises(SendRefused, match=r"chat\.slack\.bot_token") as refused:
        await transport.sender(bad).send_text(slack.general, "hi")
    assert "xoxb-not-the-token" not in str(refused.value)


async def _status(cfg: Config, state: str) -> LinkStatus:
    receiver = transport.receiver(cfg, Keep())
    await receiver.start()
    try:
        await eventually(lambda: receiver.status.state == state, timeout=10)
        return receiver.status
    finally:
        await receiver.close()


async def test_the_link_says_truthfully_what_is_wrong_and_what_to_fix(lone: FakeSlack) -> None:
    slack = lone
    bad_bot = configured(slack)
    bad_bot.chat.slack.bot_token = SecretStr("xoxb-wrong")
    status = await _status(bad_bot, "failed")
    assert "chat.slack.bot_token" in (status.error or "") and "xoxb-wrong" not in str(status)

    bad_app = configured(slack)
    bad_app.chat.slack.app_token = SecretStr("xapp-wrong")
    status = await _status(bad_app, "failed")
    assert "chat.slack.app_token" in (status.error or ""), status

    slack.scopes.discard("im:history")
    try:
        status = await _status(configured(slack), "connected")
    finally:
        slack.scopes.add("im:history")
    assert "im:history" in (status.error or ""), status


async def test_a_file_named_by_id_alone_is_looked_up_and_one_over_the_cap_never_fetched(
    lone: FakeSlack,
) -> None:
    slack = lone
    receiver = transport.SlackReceiver(configured(slack), Keep())
    by_id = slack.human_sends_file(slack.general, "a.png", b"\x89PNG", info_only=True)
    got = inbound(by_id, own_user=None, attach=receiver._attached)
    assert got is not None and got.attachment is not None
    assert await got.attachment.fetch(1_000) == b"\x89PNG"  # files.info said where it is
    big = slack.human_sends_file(slack.general, "big.pdf", PDF * 100)
    got = inbound(big, own_user=None, attach=receiver._attached)
    assert got is not None and got.attachment is not None
    with pytest.raises(AttachmentRefused, match="more than"):
        await got.attachment.fetch(100)
    assert slack.downloads == [by_id["files"][0]["id"]]


async def test_slack_away_shows_reconnecting_then_connected_again(lone: FakeSlack) -> None:
    fake = lone
    receiver = transport.receiver(configured(fake), Keep())
    await receiver.start()
    try:
        await eventually(lambda: receiver.status.state == "connected", timeout=10)
        await fake.stop()
        await eventually(lambda: receiver.status.state == "reconnecting", timeout=20)
        assert "Slack" in (receiver.status.error or "")
        await fake.start()
        await eventually(lambda: receiver.status.state == "connected", timeout=30)
    finally:
        await receiver.close()
