"""Slack's Events API over HTTP (``chat.slack.mode: "http"``), and what Slack delivers read as
agentcomms sees it. The rules first, table-driven and without a network: Slack's markup as the
words a person wrote, which events reach an agent, which presses count, and every request's
signature and timestamp checked before its body is used. Then the wire once: Slack's signed
posts to ``/webhooks/slack/events`` and ``/webhooks/slack/interactivity`` on a real gateway
(Temporal, tmux, SQLite), forged, stale and replayed ones refused with nothing recorded."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config
from agentcomms.errors import VoiceNoteRefused
from agentcomms.ids import provider_event_id
from agentcomms.transports import InboundMessage, InboundResult
from agentcomms.transports._slack_events import SignedRequests, inbound, plain, press
from agentcomms.transports._slack_sender import escaped, message_ref, parse_ref, thread_of
from agentcomms.transports.slack import SlackReceiver
from tests.fakes.serve import free_port
from tests.fakes.slack import FakeSlack, buttons, rendered
from tests.support.chat import PUBLIC_URL, connected, with_slack
from tests.support.hooks import open_approval
from tests.support.sinks import TakesNoPresses
from tests.support.stack import Stack, recording_pane, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually, typed

AGENT = "slack-http"
BOT = "U0BOT"


@pytest.mark.parametrize(
    ("markup", "words"),
    [
        ("plain words", "plain words"),
        ("ask <@U0BOB>", "ask @U0BOB"),
        ("ask <@U0BOB|bob>", "ask @bob"),
        ("in <#C0DEV|dev>", "in #dev"),
        ("<!here> and <!subteam^S1|@ops>", "@here and @@ops"),
        ("see <https://x.test|the docs>", "see the docs (https://x.test)"),
        ("see <https://x.test>", "see https://x.test"),
        ("a &lt;b&gt; &amp;amp;", "a <b> &amp;"),  # undone once: what was typed stays
        ("&lt;@U0FAKE&gt;", "<@U0FAKE>"),  # typed brackets are text, not a mention
    ],
)
def test_slacks_markup_reads_as_the_person_wrote_it(markup: str, words: str) -> None:
    assert plain(markup) == words


def test_what_goes_out_shows_as_written_and_a_threads_message_keeps_its_thread() -> None:
    assert escaped("<!channel> & <https://evil|docs>") == (
        "&lt;!channel&gt; &amp; &lt;https://evil|docs&gt;"
    )
    assert plain(escaped("<!channel> & co")) == "<!channel> & co"
    assert message_ref("1.2") == "1.2" and message_ref("1.2", "1.2") == "1.2"
    assert parse_ref(message_ref("1.3", "1.2")) == ("1.3", "1.2")
    assert parse_ref("1.2") == ("1.2", "1.2")
    assert thread_of("1.3~1.2") == "1.2" and thread_of("1.3") == "1.3"
    assert thread_of("not-a-ts") is None and thread_of(None) is None


def _event(**changes: Any) -> dict[str, Any]:
    event = {"type": "message", "channel": "C1", "user": "U1", "text": "hi", "ts": "1.1"}
    return {k: v for k, v in (event | changes).items() if v is not None}


@pytest.mark.parametrize(
    ("event", "taken"),
    [
        (_event(), True),
        (_event(subtype="thread_broadcast"), True),
        (_event(user=BOT), False),  # the app's own words
        (_event(bot_id="B9"), False),  # another bot's
        (_event(subtype="message_changed"), False),  # an edit
        (_event(subtype="channel_join"), False),
        (_event(subtype="bot_message"), False),
        (_event(type="app_mention"), False),
        (_event(text="  "), False),
        (_event(user=None), False),
        (_event(text="", files=[{"id": "F1"}], subtype="file_share"), True),
    ],
)
def test_only_a_persons_words_reach_an_agent(event: dict[str, Any], taken: bool) -> None:
    assert (inbound(event, own_user=BOT) is not None) == taken


def test_a_message_says_who_where_and_which_thread() -> None:
    got = inbound(
        _event(ts="5.2", thread_ts="5.1", user_profile={"display_name": "Al"}), own_user=BOT
    )
    assert got is not None
    assert (got.channel_id, got.message_id, got.reply_to) == ("slack:C1", "5.2~5.1", "5.1")
    assert (got.sender_id, got.sender_name) == ("U1", "Al")
    file = inbound(_event(files=[{"id": "F1"}], subtype="file_share"), own_user=BOT)
    assert file is not None and file.text == "[file not passed on] hi"


async def test_a_clips_file_is_fetched_only_from_slacks_file_host() -> None:
    cfg = with_slack(FakeSlack(), AGENT)(Config())  # base_url at 127.0.0.1: that host too
    receiver = SlackReceiver(cfg, Keep())
    clip = {"mimetype": "audio/webm", "url_private_download": "https://evil.example/clip"}
    got = inbound(
        _event(text="", files=[clip], subtype="file_share"), own_user=BOT, voice=receiver._clip
    )
    assert got is not None and got.voice is not None and got.voice.content_type == "audio/webm"
    with pytest.raises(VoiceNoteRefused, match="not Slack's"):
        await got.voice.fetch(1_000_000)  # the bot token is never sent there
    # Words with a clip: the words, and the agent told something came with them.
    worded = inbound(_event(files=[clip], subtype="file_share"), own_user=BOT, voice=receiver._clip)
    assert worded is not None and worded.voice is None and worded.text.startswith("[file")


PDF_FILE = {"id": "F1", "name": "spec.pdf", "mimetype": "application/pdf", "size": 9}
PNG_FILE = {"id": "F2", "name": "shot.png", "mimetype": "image/png"}
CLIP_FILE = {"id": "F3", "mimetype": "audio/webm"}


@pytest.mark.parametrize(
    ("text", "files", "attached", "words", "unreadable"),
    [
        ("read this", [PDF_FILE], ("document", "spec.pdf"), "read this", None),
        ("", [PNG_FILE], ("photo", "shot.png"), "", None),
        # One file at a time: the others are named, not lost without a word.
        ("", [PNG_FILE, PDF_FILE], ("photo", "shot.png"), "[other files not passed on]", None),
        # A clip alone is heard, not saved; with words it is named.
        ("", [CLIP_FILE], None, "", None),
        ("hi", [CLIP_FILE], None, "[file not passed on] hi", None),
        (
            "hi",
            [CLIP_FILE, PDF_FILE],
            ("document", "spec.pdf"),
            "[other files not passed on] hi",
            None,
        ),
    ],
)
def test_a_messages_first_file_goes_to_the_agent_and_the_rest_are_named(
    text: str,
    files: list[dict[str, Any]],
    attached: tuple[str, str] | None,
    words: str,
    unreadable: str | None,
) -> None:
    receiver = SlackReceiver(with_slack(FakeSlack(), AGENT)(Config()), Keep())
    got = inbound(
        _event(text=text, files=files, subtype="file_share"),
        own_user=BOT,
        voice=receiver._clip,
        attach=receiver._attached,
    )
    assert got is not None
    kept = (got.attachment.kind, got.attachment.name) if got.attachment else None
    assert (kept, got.text, got.unreadable) == (attached, words, unreadable)
    assert (got.voice is not None) == (files == [CLIP_FILE] and not text)


class Keep(TakesNoPresses):
    async def accept(self, message: InboundMessage) -> InboundResult:
        return InboundResult("queued")


def _payload(**changes: Any) -> dict[str, Any]:
    message = {"ts": "7.1", "user": BOT, "blocks": []}
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": "U1", "name": "alice"},
        "channel": {"id": "C1"},
        "message": message,
        "actions": [{"type": "button", "value": "ap:K7QF:a:x", "action_id": "a"}],
    }
    return payload | changes


@pytest.mark.parametrize(
    ("payload", "counts"),
    [
        (_payload(), True),
        (_payload(message={"ts": "7.1", "user": "U0OTHER"}), False),  # not our message
        (_payload(type="view_submission"), False),
        (_payload(actions=[{"type": "static_select", "value": "x"}]), False),
        (_payload(actions=[]), False),
        (_payload(user={}), False),
        (_payload(channel={}), False),
    ],
)
def test_only_a_press_on_the_apps_own_button_counts(payload: dict[str, Any], counts: bool) -> None:
    assert (press(payload, own_user=BOT, own_bot="B0") is not None) == counts


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_request_counts_only_signed_now_with_the_secret_and_once() -> None:
    clock = Clock()
    fake = FakeSlack()
    signed = SignedRequests(fake.signing_secret, now=clock)
    body = b'{"type":"event_callback"}'

    def headers(**kw: Any) -> tuple[str, str]:
        h = fake.sign(body, timestamp=int(clock.now), **kw)
        return h["X-Slack-Request-Timestamp"], h["X-Slack-Signature"]

    stamp, good = headers()
    refused = {
        "unsigned": signed.check(None, None, body),
        "no timestamp": signed.check(None, good, body),
        "another secret": signed.check(*headers(secret="not-ours"), body),
        "another body": signed.check(stamp, good, body + b" "),
        "six minutes old": signed.check(
            str(int(clock.now) - 360),
            fake.sign(body, timestamp=int(clock.now) - 360)["X-Slack-Signature"],
            body,
        ),
        "six minutes ahead": signed.check(
            str(int(clock.now) + 360),
            fake.sign(body, timestamp=int(clock.now) + 360)["X-Slack-Signature"],
            body,
        ),
    }
    for why, refusal in refused.items():
        assert refusal is not None, why
        assert "X-Slack-Signature" in refusal.reason, (why, refusal)
    assert signed.check(stamp, good, body) is None
    replayed = signed.check(stamp, good, body)
    assert replayed is not None and "replay" in replayed.reason
    signed.forget(good)  # taken but not kept: Slack's retry of it counts
    assert signed.check(stamp, good, body) is None
    clock.now += 299
    assert signed.check(stamp, good, body) is not None  # still remembered
    clock.now += 2
    assert signed.check(stamp, good, body) is not None  # now too old to be taken
    # The headers alone refuse a stranger before the body is read.
    assert signed.before_body(None, None) is not None
    assert signed.before_body(stamp, good) is not None  # stale by now


# ---- the wire: a gateway taking Slack's Events API ------------------------------------------------


@pytest.fixture(scope="module")
async def slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture(scope="module")
async def stack_and_port(
    temporal_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory, slack: FakeSlack
) -> AsyncIterator[tuple[Stack, int]]:
    port = free_port()
    configure = with_slack(slack, AGENT, port=port, mode="http")
    tmp = tmp_path_factory.mktemp("slack-http")
    async with running_stack(temporal_env.client, tmp, configure=configure) as s:
        await connected(s, "slack")
        yield s, port


@pytest.fixture
def stack(stack_and_port: tuple[Stack, int]) -> Stack:
    return stack_and_port[0]


async def _post(port: int, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        kind = (
            "application/json" if path.endswith("events") else "application/x-www-form-urlencoded"
        )
        # Slack posts to the public URL; its Host is the public one.
        host = PUBLIC_URL.split("//", 1)[1].split("/", 1)[0]
        return await http.post(
            path, content=body, headers={"Content-Type": kind, "Host": host} | headers
        )


async def test_signed_events_are_typed_and_forged_stale_or_replayed_ones_refused(
    stack: Stack, stack_and_port: tuple[Stack, int], slack: FakeSlack, tmux: Tmux, tmp_path: Path
) -> None:
    port = stack_and_port[1]
    out = await recording_pane(stack, AGENT, tmux, tmp_path)
    path = "/webhooks/slack/events"

    challenge = json.dumps({"type": "url_verification", "challenge": "c-123"}).encode()
    answer = await _post(port, path, challenge, slack.sign(challenge))
    assert answer.status_code == 200 and answer.json() == {"challenge": "c-123"}

    forged_events = [slack.message(slack.general, f"forged {i}") for i in range(4)]
    bodies = [json.dumps(slack.event_callback(e)).encode() for e in forged_events]
    stale = int(time.time()) - 600
    for why, body, headers in [
        ("unsigned", bodies[0], {}),
        ("another secret", bodies[1], slack.sign(bodies[1], secret="guessed")),
        ("stale", bodies[2], slack.sign(bodies[2], timestamp=stale)),
        ("another body's", bodies[3], slack.sign(bodies[0])),
    ]:
        refused = await _post(port, path, body, headers)
        assert refused.status_code == 403, (why, refused.text)
        assert "X-Slack-Signature" in refused.text, (why, refused.text)

    said = slack.message(slack.general, "deploy?")
    body = json.dumps(slack.event_callback(said)).encode()
    headers = slack.sign(body)
    taken = await _post(port, path, body, headers)
    assert taken.status_code == 200, taken.text
    replayed = await _post(port, path, body, headers)
    assert replayed.status_code == 403 and "replay" in replayed.text

    await typed(out, f"[slack:{slack.general} from Alice] deploy?\r".encode())
    assert await stack.store.get_event(provider_event_id("slack", slack.general, said["ts"]))
    for event in forged_events:
        ts = event["ts"]
        assert await stack.store.get_event(provider_event_id("slack", slack.general, ts)) is None


async def test_a_signed_press_decides_and_a_forged_one_changes_nothing(
    stack: Stack, stack_and_port: tuple[Stack, int], slack: FakeSlack
) -> None:
    port = stack_and_port[1]
    path = "/webhooks/slack/interactivity"
    approval = await open_approval(stack, AGENT)
    message = await eventually(lambda: slack.request_for(approval))
    allow = dict(buttons(message))["Allow"]

    forged = slack.interactivity_body(slack.press(message, allow))
    refused = await _post(port, path, forged, slack.sign(forged, secret="guessed"))
    assert refused.status_code == 403 and "X-Slack-Signature" in refused.text
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}

    body = slack.interactivity_body(slack.press(message, allow))
    pressed = await _post(port, path, body, slack.sign(body))
    assert pressed.status_code == 200, pressed.text
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow"} and waited["decided_via"] == "slack"
    updated = await eventually(lambda: [u for u in slack.updates if u["ts"] == message["ts"]])
    assert buttons(updated[-1]) == [] and "allowed by alice on Slack" in rendered(updated[-1])
    told = await eventually(lambda: slack.ephemerals)
    assert f"{approval}: allowed by alice on Slack" in told[-1]["text"]
