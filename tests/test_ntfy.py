"""Push notifications through ntfy: an approval's buttons are one-time tokens signed for that
approval and that answer. The token's rules and what a notification carries are unit tests;
the whole path (a request published to a stand-in ntfy speaking its publish API, a button
pressed by posting to the gateway's published URL through a tunnel, the first press deciding,
a replayed or altered one refused) runs once on one real stack shared by the module: real
Temporal, gateway, worker and SQLite."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from agentcomms.approval_models import ApprovalRequest
from agentcomms.cli.doctor import _webhooks_used
from agentcomms.client import GatewayClient
from agentcomms.config import AgentConfig, Config, ServerConfig
from agentcomms.config.notify import NotifyConfig
from agentcomms.errors import ChatProviderUnavailable, GatewayError, RateLimited, SendRefused
from agentcomms.transports.ntfy import MAX_BYTES, Notification, NtfySender
from gateway.approvals.push import ActionRefused, ActionTokens, notification
from gateway.approvals.words import HIDDEN_SECRET
from gateway.socket.protocol import NOT_YOURS
from tests.fakes.ntfy import TOKEN, FakeNtfy
from tests.fakes.serve import free_port
from tests.support.approvals import approval_request
from tests.support.chat import PUBLIC_URL, provider_is
from tests.support.hooks import open_approval, open_question
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually

TOPIC = "alice-phone-7f3k"
NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)


def _config(*, public_url: str | None = PUBLIC_URL, **agents: AgentConfig) -> Config:
    cfg = Config(server=ServerConfig(public_url=public_url), agents=agents)
    chat = cfg.chat.model_copy(
        update={
            "ntfy": cfg.chat.ntfy.model_copy(update={"enabled": True, "topic": TOPIC}),
            "channels": {f"ntfy:{TOPIC}": "backend"},
        }
    )
    return cfg.model_copy(update={"chat": chat})


# ---- the token -----------------------------------------------------------------------------------

TOKENS = ActionTokens(b"k" * 32)


def _minted(short: str = "a", request: ApprovalRequest | None = None) -> str:
    return TOKENS.mint(
        request or approval_request(), TOPIC, short, expires=NOW + timedelta(hours=1)
    )


def _swap(token: str, index: int, value: str) -> str:
    parts = token.split(".")
    parts[index] = value
    return ".".join(parts)


REFUSED = [
    ("another answer", lambda: _swap(_minted("a"), 2, "d"), "not made by this deployment"),
    ("another approval", lambda: _swap(_minted(), 1, "M4XZ"), "not made by this deployment"),
    ("another topic", lambda: _swap(_minted(), 4, "mallory"), "not made by this deployment"),
    ("a later expiry", lambda: _swap(_minted(), 5, "9999999999"), "not made by this deployment"),
    (
        "another key's",
        lambda: ActionTokens(b"x" * 32).mint(
            approval_request(), TOPIC, "a", expires=NOW + timedelta(hours=1)
        ),
        "not made by this deployment",
    ),
    ("no tag", lambda: _minted().rpartition(".")[0], "not an agentcomms button"),
    ("garbage", lambda: "garbage", "not an agentcomms button"),
]


@pytest.mark.parametrize(("why", "token", "said"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_token_altered_in_any_part_or_made_elsewhere_is_refused(
    why: str, token: Any, said: str
) -> None:
    with pytest.raises(ActionRefused, match=said):
        TOKENS.read(token(), now=NOW)


def test_a_token_reads_back_as_minted_until_it_expires() -> None:
    token = _minted("o2")
    press = TOKENS.read(token, now=NOW + timedelta(minutes=59))
    assert (press.approval_id, press.short, press.topic) == ("K7QF", "o2", TOPIC)
    with pytest.raises(ActionRefused, match="expired"):
        TOKENS.read(token, now=NOW + timedelta(hours=1, seconds=1))


def test_two_tokens_for_the_same_answer_differ() -> None:
    # Each button its own: one pressed (spent) leaves a later notification's button usable.
    assert _minted() != _minted()


# ---- what a notification carries -----------------------------------------------------------------


def _labels(note: Notification) -> list[str]:
    return [b.label for b in note.buttons]


SHOWN = [
    ("a permission", approval_request(), ["Allow", "Deny"]),
    (
        "a permission offering the session",
        approval_request(
            suggestions=[{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]
        ),
        ["Allow", "Allow for this session", "Deny"],
    ),
    (
        "a plan",
        approval_request(ask="plan", question="1. build\n2. ship"),
        ["Approve", "Keep planning"],
    ),
    (
        "a question",
        approval_request(ask="question", question="Which?", options=["red", "blue"]),
        ["red", "blue"],
    ),
]


@pytest.mark.parametrize(("what", "request_", "labels"), SHOWN, ids=[s[0] for s in SHOWN])
def test_a_request_gets_a_button_per_answer_each_a_link_to_the_published_url(
    what: str, request_: ApprovalRequest, labels: list[str]
) -> None:
    note = notification(_config(), TOKENS, request_, TOPIC, now=NOW)
    assert _labels(note) == labels
    for button in note.buttons:
        assert button.url.startswith(f"{PUBLIC_URL}/actions/ntfy/n1.K7QF.")
        assert TOKENS.read(button.url.rpartition("/")[2], now=NOW).topic == TOPIC
    assert note.priority == 4 and "(approval K7QF)" in note.message


NOT_HERE = [
    ("no published URL", _config(public_url=None), approval_request(), "no published URL"),
    (
        "a secret",
        _config(),
        approval_request(input_text="curl -H 'Authorization: Bearer abcdefgh12345678' x"),
        "looks like a secret",
    ),
    (
        "too long",
        _config(),
        approval_request(input_text="x" * 2_000),
        "too long for a push notification",
    ),
    (
        "several to tick",
        _config(),
        approval_request(ask="question", question="Which?", options=["a", "b"], multi=True),
        "more options than",
    ),
    (
        "four options",
        _config(),
        approval_request(ask="question", question="Which?", options=["a", "b", "c", "d"]),
        "more options than",
    ),
    (
        "not an approver",
        _config(backend=AgentConfig(target="s:0.0", approvers=["telegram:456"])),
        approval_request(),
        f"ntfy:{TOPIC} is not one",
    ),
]


@pytest.mark.parametrize(("what", "cfg", "request_", "why"), NOT_HERE, ids=[n[0] for n in NOT_HERE])
def test_without_buttons_a_notification_says_where_to_answer(
    what: str, cfg: Config, request_: ApprovalRequest, why: str
) -> None:
    note = notification(cfg, TOKENS, request_, TOPIC, now=NOW)
    assert note.buttons == ()
    assert "Not to be answered here:" in note.message and why in note.message
    assert "the console" in note.message
    assert "abcdefgh12345678" not in note.message
    assert len(note.message.encode()) <= MAX_BYTES


def test_a_hidden_secret_says_so_in_the_notification() -> None:
    secret = approval_request(input_text="OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx run")
    note = notification(_config(), TOKENS, secret, TOPIC, now=NOW)
    assert HIDDEN_SECRET in note.message and "sk-abc" not in note.message


@pytest.mark.parametrize(("public_url", "listened"), [(PUBLIC_URL, True), (None, False)])
def test_doctor_checks_the_listener_the_buttons_post_to(
    public_url: str | None, listened: bool
) -> None:
    assert _webhooks_used(_config(public_url=public_url)) is listened


# ---- ntfy's publish API --------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def ntfy() -> AsyncIterator[FakeNtfy]:
    fake = FakeNtfy()
    async with fake.server:
        yield fake


def _sender(fake: FakeNtfy, token: str | None = TOKEN) -> NtfySender:
    cfg = _config()
    section = cfg.chat.ntfy.model_copy(
        update={"server": fake.base_url, "token": SecretStr(token) if token else None}
    )
    return NtfySender(
        cfg.model_copy(update={"chat": cfg.chat.model_copy(update={"ntfy": section})})
    )


async def test_ntfys_answers_become_retry_decisions_that_name_what_to_fix(ntfy: FakeNtfy) -> None:
    sender = _sender(ntfy)
    message_id = await sender.send_text(TOPIC, "the build is green")
    assert ntfy.published[-1]["id"] == message_id and ntfy.published[-1]["topic"] == TOPIC
    with pytest.raises(SendRefused, match=r"chat\.ntfy\.token"):
        await _sender(ntfy, token="tk_wrong").send_text(TOPIC, "x")
    ntfy.fail_next(429)
    with pytest.raises(RateLimited):
        await sender.send_text(TOPIC, "x")
    ntfy.fail_next(502)
    with pytest.raises(ChatProviderUnavailable):
        await sender.send_text(TOPIC, "x")


# ---- the whole path, once ------------------------------------------------------------------------

AGENT = f"backend-{uuid.uuid4().hex[:8]}"
NOTIFY_TOPIC = "alice-notify"


@pytest.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment,
    tmp_path_factory: pytest.TempPathFactory,
    ntfy: FakeNtfy,
) -> AsyncIterator[tuple[Stack, str]]:
    """A stack whose agent's chat is the ntfy topic, behind ``PUBLIC_URL`` (a tunnel to the
    gateway's port): the stack and where the tunnel ends."""
    port = free_port()

    def configure(cfg: Config) -> Config:
        section = cfg.chat.ntfy.model_copy(
            update={
                "enabled": True,
                "server": ntfy.base_url,
                "topic": TOPIC,
                "token": SecretStr(TOKEN),
            }
        )
        chat = cfg.chat.model_copy(update={"ntfy": section, "channels": {f"ntfy:{TOPIC}": AGENT}})
        server = cfg.server.model_copy(update={"http_port": port, "public_url": PUBLIC_URL})
        # One-way notifications to a topic of their own, which any agent may send to.
        notify = NotifyConfig(enabled=True, topic=NOTIFY_TOPIC)
        return cfg.model_copy(update={"chat": chat, "server": server, "notify": notify})

    tmp = tmp_path_factory.mktemp("ntfy")
    async with running_stack(temporal_env.client, tmp, configure=configure) as s:
        yield s, f"http://127.0.0.1:{port}"


async def _press(ntfy: FakeNtfy, note: dict[str, Any], label: str, local: str) -> Any:
    return await ntfy.press(note, label, public_url=PUBLIC_URL, local_url=local)


async def test_a_press_answers_once_and_a_replayed_or_altered_one_changes_nothing(
    stack: tuple[Stack, str], ntfy: FakeNtfy
) -> None:
    s, local = stack
    await eventually(lambda: provider_is(s, "ntfy", "connected"))
    approval = await open_approval(s, AGENT)
    note = await eventually(lambda: ntfy.about(f"(approval {approval})"))
    assert note["topic"] == TOPIC and note["priority"] == 4
    assert f"{AGENT} asks to use Bash:\ntouch done.txt" in note["message"]
    assert [a["label"] for a in note["actions"]] == ["Allow", "Allow for this session", "Deny"]

    # The answer altered in the link: refused, and the approval still waits.
    deny = next(a for a in note["actions"] if a["label"] == "Deny")
    altered = {**deny, "url": deny["url"].replace(f".{approval}.d.", f".{approval}.a.")}
    answer = await ntfy.post_action(altered, public_url=PUBLIC_URL, local_url=local)
    assert answer.status_code == 403 and "not made by this deployment" in answer.text
    assert (await s.call("approval_wait", id=approval, wait_s=0.2)) == {"status": "open"}

    answer = await _press(ntfy, note, "Allow", local)
    assert answer.status_code == 200, answer.text
    waited = await s.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow"}
    assert (waited["decided_by"], waited["decided_via"]) == (f"ntfy:{TOPIC}", "ntfy")
    told = await eventually(lambda: ntfy.about(f"{approval} ({AGENT}, Bash): allowed"))
    assert "on a push notification" in told["message"]

    replayed = await _press(ntfy, note, "Allow", local)
    assert replayed.status_code == 409 and "pressed already" in replayed.text
    late = await _press(ntfy, note, "Deny", local)
    assert late.status_code == 409 and "answered already" in late.text
    assert (await s.call("approval_wait", id=approval, wait_s=1))["decision"] == {
        "behavior": "allow"
    }


async def test_a_questions_option_pressed_answers_it(
    stack: tuple[Stack, str], ntfy: FakeNtfy
) -> None:
    s, local = stack
    approval = await open_question(
        s, AGENT, ["red", "blue"], question="Which colour?", several=False
    )
    note = await eventually(lambda: ntfy.about(f"(approval {approval})"))
    answer = await _press(ntfy, note, "blue", local)
    assert answer.status_code == 200, answer.text
    waited = await s.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "answer": "blue"}


async def test_the_agents_reply_to_its_topic_is_published(
    stack: tuple[Stack, str], ntfy: FakeNtfy
) -> None:
    s, _ = stack
    await s.call("reply", channel_id=f"ntfy:{TOPIC}", message="tests pass", agent_id=AGENT)
    note = await eventually(lambda: ntfy.about("tests pass"))
    assert note["topic"] == TOPIC


async def test_a_turns_end_is_notified_and_an_agent_may_notify_its_human(
    stack: tuple[Stack, str], ntfy: FakeNtfy
) -> None:
    s, _ = stack
    await s.call("register", agent_id=AGENT, target="nowhere:0.0")
    payload = {"last_assistant_message": "Refactor done; 12 tests pass."}
    await s.call(
        "agent_hook", kind="claude-code", agent_id=AGENT, event="Stop", at_ns=1, payload=payload
    )
    note = await eventually(lambda: ntfy.about("Refactor done; 12 tests pass."))
    assert (note["topic"], note["title"]) == (NOTIFY_TOPIC, f"{AGENT} finished its turn")

    async with GatewayClient(s.cfg.server.socket(), caller=AGENT) as as_agent:
        channel = f"ntfy:{NOTIFY_TOPIC}"
        sent = await as_agent.call("reply", channel_id=channel, message="deploy?", agent_id=AGENT)
        assert sent["delivered"] is True, sent
        note = await eventually(lambda: ntfy.about("deploy?"))
        assert note["topic"] == NOTIFY_TOPIC
        with pytest.raises(GatewayError) as refused:
            await as_agent.call("reply", channel_id="ntfy:elsewhere", message="x", agent_id=AGENT)
        assert refused.value.code == NOT_YOURS
