"""One-way push notifications (the `notify` section): what each hook and each approval notifies,
and what it does not, published to a stand-in ntfy speaking its publish API. The wiring (a real
hook report through the gateway's socket, an agent's own send_message to the topic) runs once
in tests/test_ntfy.py's stack."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from agentcomms.approval_models import ApprovalRequest, ApprovalView, Decision
from agentcomms.config import Config
from gateway.messages.notify import PushNotify
from tests.fakes.ntfy import FakeNtfy


@pytest.fixture(scope="module")
async def ntfy() -> AsyncIterator[FakeNtfy]:
    fake = FakeNtfy(token=None)
    async with fake.server:
        yield fake


def _notify(ntfy: FakeNtfy, *, mapped: bool = False, **notify: Any) -> tuple[PushNotify, str]:
    """Notifications to a topic of the test's own (the fake is the module's)."""
    topic = f"notify-{uuid.uuid4().hex[:8]}"
    cfg = Config.model_validate(
        {
            "chat": {
                "ntfy": {"enabled": True, "server": ntfy.base_url, "topic": "alice-chat"},
                "channels": {f"ntfy:{topic}": "backend"} if mapped else {},
            },
            "notify": {"enabled": True, "topic": topic, **notify},
        }
    )
    return PushNotify(cfg), topic


HOOKS = [
    (
        "a turn's reply",
        "Stop",
        {"last_assistant_message": "All 12 tests pass."},
        "backend finished its turn",
        "All 12 tests pass.",
    ),
    (
        "Gemini's reply",
        "AfterAgent",
        {"prompt_response": "done"},
        "backend finished its turn",
        "done",
    ),
    (
        "a turn's error",
        "StopFailure",
        {"error": "rate_limit"},
        "backend finished its turn",
        "The agent's turn stopped on an error: rate_limit",
    ),
    (
        "a session's end",
        "SessionEnd",
        {"reason": "logout"},
        "backend went offline",
        "backend's session ended (logout): messages to it wait until it is back.",
    ),
]


@pytest.mark.parametrize(
    ("what", "event", "payload", "title", "message"), HOOKS, ids=[h[0] for h in HOOKS]
)
async def test_a_hook_notifies_the_human(
    ntfy: FakeNtfy, what: str, event: str, payload: dict[str, Any], title: str, message: str
) -> None:
    notify, topic = _notify(ntfy)
    await notify.agent_did("backend", event, payload)
    await notify.drain()
    [note] = ntfy.to(topic)
    assert (note["title"], note["message"]) == (title, message)


async def test_a_long_reply_is_cut_saying_where_the_whole_is(ntfy: FakeNtfy) -> None:
    notify, topic = _notify(ntfy)
    await notify.agent_did("backend", "Stop", {"last_assistant_message": "word " * 400})
    await notify.drain()
    [note] = ntfy.to(topic)
    assert note["message"].endswith("(the whole: `agentcomms inbox`, or the console)")
    assert len(note["message"]) < 700


SILENT = [
    ("not asked for", {"on": ["agent_offline"]}, "Stop"),
    ("switched off", {"enabled": False}, "Stop"),
    ("nothing to tell", {}, "PreToolUse"),
]


@pytest.mark.parametrize(("what", "notify_", "event"), SILENT, ids=[s[0] for s in SILENT])
async def test_what_is_not_asked_for_is_not_notified(
    ntfy: FakeNtfy, what: str, notify_: dict[str, Any], event: str
) -> None:
    notify, topic = _notify(ntfy, **notify_)
    await notify.agent_did("backend", event, {"last_assistant_message": "done"})
    await notify.drain()
    assert ntfy.to(topic) == []


def _view(*, decided: bool = False) -> ApprovalView:
    request = ApprovalRequest(
        id="K7QF", agent_id="backend", tool="Bash", input_text="touch done.txt", timeout_s=60
    )
    decision = Decision(approval_id="K7QF", behavior="deny", by="Alice", via="cli")
    return ApprovalView(
        request=request, opened_at=datetime.now(UTC), decision=decision if decided else None
    )


async def test_an_approval_waiting_is_notified_where_the_topic_does_not_show_it(
    ntfy: FakeNtfy,
) -> None:
    notify, topic = _notify(ntfy)
    notify.approval(_view())
    notify.approval(_view(decided=True))  # decided: nothing more to ask
    await notify.drain()
    [note] = ntfy.to(topic)
    assert note["title"] == "backend waits for you: approval K7QF" and note["priority"] == 4
    assert note["message"].startswith("backend asks to use Bash:\ntouch done.txt\n\nAnswer K7QF")
    assert "actions" not in note or note["actions"] == []

    # A topic that is the agent's chat shows the request already, with its buttons.
    mapped, topic = _notify(ntfy, mapped=True)
    mapped.approval(_view())
    await mapped.drain()
    assert ntfy.to(topic) == []


def test_an_agent_may_send_to_the_topic_as_the_config_says() -> None:
    cfg = Config.model_validate(
        {
            "chat": {
                "ntfy": {"enabled": True, "topic": "alice-chat"},
                "channels": {"ntfy:alice-notify": "backend"},
            },
            "notify": {"enabled": True, "topic": "alice-notify", "agents_may_send": False},
        }
    )
    notify, ntfy, channels = cfg.notify, cfg.chat.ntfy, cfg.chat.channels
    assert notify.may_send(ntfy, channels, "backend", "ntfy:alice-notify")
    assert not notify.may_send(ntfy, channels, "frontend", "ntfy:alice-notify")
    assert not notify.may_send(ntfy, channels, "backend", "ntfy:alice-chat")
    everyone = notify.model_copy(update={"agents_may_send": True})
    assert everyone.may_send(ntfy, channels, "frontend", "ntfy:alice-notify")
    assert not notify.model_copy(update={"enabled": False}).may_send(
        ntfy, channels, "backend", "ntfy:alice-notify"
    )
