"""Telegram end to end: the real python-telegram-bot against a local Bot API server (tests/fakes),
our gateway, worker and outbox on a real Temporal dev server, real tmux panes, real SQLite."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from agentcomms.client import GatewayClient
from agentcomms.config import Config, MailboxConfig
from agentcomms.ids import provider_event_id
from agentcomms.outbox_models import receipt_item
from agentcomms.transports import split_text
from agentcomms.workflow_ids import mailbox_id
from gateway.service import Gateway
from tests.fakes.serve import free_port
from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, connected, provider_is, provider_status, with_telegram
from tests.support.mailbox import mailbox_replayer, settled_history
from tests.support.stack import Stack, delivered, recording_pane, register, running_stack
from tests.support.tmux import Tmux, recorder
from tests.support.waiting import eventually


@pytest.fixture
def stack(telegram_stack: Stack) -> Stack:
    return telegram_stack


async def test_a_message_from_telegram_is_typed_into_the_agent_pane_with_receipts(
    stack: Stack, telegram: FakeTelegram, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    out = await recording_pane(stack, agent, tmux, tmp_path)
    await connected(stack, "telegram")

    update = telegram.human_says(CHAT, "deploy to staging?\nthanks", first_name="Alice")

    expected = b"[telegram:456 from Alice] deploy to staging?\n| thanks\r"
    await eventually(lambda: out.read_bytes() == expected)
    message_id = update["message"]["message_id"]
    event = await stack.store.get_event(provider_event_id("telegram", CHAT, message_id))
    assert event is not None and event.agent_id == agent and event.channel_id == "telegram:456"
    assert event.payload["text"] == "deploy to staging?\nthanks"
    assert event.payload["sender_id"] == "456" and event.payload["sender_name"] == "Alice"
    # Receipts: a reaction when it was queued, another once typed.
    await eventually(lambda: len(telegram.reactions) == 2)
    assert [r["emoji"] for r in telegram.reactions] == [["👀"], ["✍"]]
    assert {r["message_id"] for r in telegram.reactions} == {message_id}
    # The agent reads it without the pane prefix, with who and where as fields.
    await eventually(lambda: delivered(stack, event.id))
    history = await stack.call("history", channel_id="telegram:456", limit=10)
    assert [m["payload"]["text"] for m in history["messages"]] == ["deploy to staging?\nthanks"]


async def test_the_same_update_delivered_twice_is_one_event_typed_once(
    stack: Stack, telegram: FakeTelegram, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    out = await recording_pane(stack, agent, tmux, tmp_path)
    await connected(stack, "telegram")

    first = telegram.human_says(CHAT, "once")
    await eventually(lambda: out.read_bytes() == b"[telegram:456 from Alice] once\r")
    telegram.deliver(first)  # Telegram re-sends it (as after a restart, unconfirmed)
    telegram.deliver(first)
    telegram.human_says(CHAT, "after")
    await eventually(lambda: out.read_bytes().endswith(b"after\r"))

    assert out.read_bytes() == (
        b"[telegram:456 from Alice] once\r[telegram:456 from Alice] after\r"
    )
    events = await stack.store.events_after(agent, None, 100)
    assert [e.payload["text"] for e in events] == ["once", "after"]


async def test_a_stranger_is_rejected_and_recorded_until_paired_and_again_once_revoked(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    agent: str,
    tmux: Tmux,
) -> None:
    stranger = 999
    channels = {f"telegram:{CHAT}": agent, f"telegram:{stranger}": agent}
    async with running_stack(
        temporal_env.client, tmp_path, configure=with_telegram(telegram, agent, channels=channels)
    ) as stack:
        out = await recording_pane(stack, agent, tmux, tmp_path)
        await connected(stack, "telegram")

        first = telegram.human_says(stranger, "let me in", first_name="Mallory")
        await eventually(lambda: telegram.texts_to(stranger))
        [answer] = telegram.texts_to(stranger)
        code = re.search(r"agentcomms pair (\w+)", answer)
        assert code, answer
        rejected = await stack.store.get_event(
            provider_event_id("telegram", stranger, first["message"]["message_id"])
        )
        assert rejected is not None and rejected.status == "rejected"
        assert rejected.payload["text"] == "let me in"

        # Writing again is recorded, but answered no more, and nothing reaches the agent.
        again = telegram.human_says(stranger, "hello??", first_name="Mallory")
        again_id = provider_event_id("telegram", stranger, again["message"]["message_id"])
        await eventually(lambda: stack.store.get_event(again_id))
        assert telegram.texts_to(stranger) == [answer]
        assert out.read_bytes() == b""
        assert (await stack.call("check_messages", agent_id=agent))["messages"] == []
        # The human's audit shows the refused messages; what the agent may read does not.
        audit = (await stack.call("events", agent_id=agent))["events"]
        assert {e["id"] for e in audit} >= {rejected.id, again_id}
        shown = (await stack.call("events", agent_id=agent, rejected=False))["events"]
        assert not {e["id"] for e in shown} & {rejected.id, again_id}
        senders = (await stack.call("senders"))["senders"]
        assert {"provider": "telegram", "sender_id": "999", "state": "pending"}.items() <= next(
            s for s in senders if s["sender_id"] == "999"
        ).items()

        paired = await stack.call("pair", code=code[1].lower(), confirm=True)  # any case
        assert paired["sender_id"] == "999" and paired["agent_id"] == agent
        # What they wrote while waiting reaches the agent now, and they are told.
        typed = b"[telegram:999 from Mallory] let me in\r[telegram:999 from Mallory] hello??\r"
        await eventually(lambda: out.read_bytes() == typed)
        await eventually(lambda: len(telegram.texts_to(stranger)) == 2)
        telegram.human_says(stranger, "thanks", first_name="Mallory")
        typed += b"[telegram:999 from Mallory] thanks\r"
        await eventually(lambda: out.read_bytes() == typed)
        senders = (await stack.call("senders"))["senders"]
        assert [s["state"] for s in senders if s["sender_id"] == "999"] == ["allowed"]

        await stack.call("revoke_sender", provider="telegram", sender_id="999")
        late = telegram.human_says(stranger, "still here", first_name="Mallory")
        late_id = provider_event_id("telegram", stranger, late["message"]["message_id"])
        await eventually(lambda: stack.store.get_event(late_id))
        assert (await stack.store.get_event(late_id)).status == "rejected"  # type: ignore[union-attr]
        await eventually(lambda: len(telegram.texts_to(stranger)) == 3)  # a new code
        assert out.read_bytes() == typed


async def test_reply_goes_out_after_429_and_500_honouring_retry_after(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    await connected(stack, "telegram")
    telegram.known_chats.add(CHAT)
    telegram.fail_next("sendMessage", 429, 500, retry_after=1)

    result = await stack.call(
        "reply", channel_id="telegram:456", message="done: 3 tests fixed", agent_id=agent
    )

    assert result["delivered"] is True and result["status"] == "delivered", result
    assert telegram.texts_to(CHAT) == ["done: 3 tests fixed"]
    assert telegram.calls.count("sendMessage") == 3
    event = await stack.store.get_event(result["event_id"])
    assert event is not None and event.status == "delivered" and event.direction == "out"
    history = await stack.call("history", channel_id="telegram:456", limit=10)
    assert [m["payload"]["text"] for m in history["messages"]] == ["done: 3 tests fixed"]


@pytest.mark.parametrize(
    ("refused", "pieces", "failing"),
    # With 4 pieces the try that fails had heartbeat twice, the second one held back by the
    # worker's throttling: the retry must still resume from it.
    [(500, 3, 2), (429, 3, 2), (500, 4, 3)],
)
async def test_a_long_reply_refused_half_way_arrives_with_each_piece_once_in_order(
    stack: Stack, telegram: FakeTelegram, agent: str, refused: int, pieces: int, failing: int
) -> None:
    await connected(stack, "telegram")
    telegram.known_chats.add(CHAT)
    text = "\n".join(f"line {i:05d}" for i in range(372 * pieces))
    expected = split_text(text, 4096)
    assert len(expected) == pieces
    telegram.fail_next("sendMessage", refused, retry_after=1, after=failing - 1)

    result = await stack.call(
        "reply", channel_id="telegram:456", message=text, agent_id=agent, reply_to="41", timeout=30
    )

    assert result["delivered"] is True, result
    assert telegram.texts_to(CHAT) == expected
    assert telegram.calls.count("sendMessage") == pieces + 1
    # Only the first piece answers the human's message; the message's id is the last piece's.
    assert [m.get("reply_to_message_id") for m in telegram.sent] == [41] + [None] * (pieces - 1)
    assert result["message_id"] == str(telegram.sent[-1]["message_id"])


async def test_a_permanent_refusal_fails_at_once_saying_what_to_fix(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    await connected(stack, "telegram")
    result = await stack.call("reply", channel_id="telegram:555", message="hi", agent_id=agent)

    assert result["delivered"] is False and result["status"] == "failed", result
    assert "does not know chat 555" in result["error"]
    assert telegram.calls.count("sendMessage") == 1
    event = await stack.store.get_event(result["event_id"])
    assert event is not None and event.status == "failed" and "555" in (event.error or "")


async def test_telegram_down_for_a_while_then_back(
    stack: Stack, telegram: FakeTelegram, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    out = await recording_pane(stack, agent, tmux, tmp_path)
    await connected(stack, "telegram")
    telegram.known_chats.add(CHAT)

    await telegram.server.stop()
    await eventually(lambda: provider_is(stack, "telegram", "reconnecting"), timeout=30)
    status = await provider_status(stack, "telegram")
    assert status["error"], status
    channels = (await stack.call("channels"))["channels"]
    assert (
        next(c for c in channels if c["channel_id"] == "telegram:456")["status"] == "reconnecting"
    )
    reply = await stack.call(
        "reply", channel_id="telegram:456", message="are you there?", agent_id=agent, timeout=1
    )
    assert reply["status"] == "queued" and reply["delivered"] is False
    telegram.human_says(CHAT, "written while the bot was away")

    await telegram.server.start()
    await connected(stack, "telegram")
    await eventually(lambda: telegram.texts_to(CHAT) == ["are you there?"], timeout=60)
    await eventually(
        lambda: out.read_bytes() == b"[telegram:456 from Alice] written while the bot was away\r",
        timeout=60,
    )


async def test_webhook_mode_checks_the_secret_token_and_answers_once_durable(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    agent: str,
    tmux: Tmux,
) -> None:
    port = free_port()
    public = "https://agents.example.test"

    def configure(cfg: Config) -> Config:
        cfg = with_telegram(
            telegram, agent, mode="webhook", webhook_secret=SecretStr("s3cret-token")
        )(cfg)
        server = cfg.server.model_copy(update={"http_port": port, "public_url": public})
        return cfg.model_copy(update={"server": server})

    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        out = await recording_pane(stack, agent, tmux, tmp_path)
        await connected(stack, "telegram")
        assert telegram.webhook is not None
        assert telegram.webhook["url"] == f"{public}/webhooks/telegram"
        assert telegram.webhook["secret_token"] == "s3cret-token"

        update = telegram.human_says(CHAT, "via webhook")
        telegram.updates.clear()  # Telegram posts it instead of holding it for getUpdates
        url = f"http://127.0.0.1:{port}/webhooks/telegram"
        event_id = provider_event_id("telegram", CHAT, update["message"]["message_id"])
        async with httpx.AsyncClient() as client:
            for secret in (None, "wrong"):
                headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret else {}
                forged = await client.post(url, json=update, headers=headers)
                assert forged.status_code == 403
            assert await stack.store.get_event(event_id) is None
            good = {"X-Telegram-Bot-Api-Secret-Token": "s3cret-token"}
            answer = await client.post(url, json=update, headers=good)
            assert answer.status_code == 200
            assert await stack.store.get_event(event_id) is not None  # durable before the 200
            assert (await client.post(url, json=update, headers=good)).status_code == 200
        await eventually(lambda: out.read_bytes() == b"[telegram:456 from Alice] via webhook\r")
        await eventually(lambda: len(telegram.reactions) == 2)
        assert out.read_bytes() == b"[telegram:456 from Alice] via webhook\r"


async def test_gateway_restarted_with_messages_in_flight_loses_and_doubles_nothing(
    stack: Stack, telegram: FakeTelegram, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    await connected(stack, "telegram")
    # Queued while the agent has no pane yet: durable in its mailbox, not typed.
    before = [telegram.human_says(CHAT, f"before {i}") for i in range(3)]
    await eventually(lambda: _count(stack, agent, 3))

    await stack.gateway.close()
    # While the gateway is down, Alice writes on; and an update the old gateway had kept but
    # not yet confirmed (as when it dies between the two) comes again.
    for i in range(2):
        telegram.human_says(CHAT, f"during {i}")
    telegram.deliver(before[-1])
    restarted = Gateway(stack.cfg, stack.client, stack.store, host=stack.host)
    await restarted.start()
    try:
        async with GatewayClient(stack.cfg.server.socket()) as rpc:
            target, out = recorder(tmux, tmp_path, "rec")
            await rpc.call(
                "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
            )
            texts = [f"before {i}" for i in range(3)] + [f"during {i}" for i in range(2)]
            expected = [f"[telegram:456 from Alice] {t}".encode() for t in texts]

            def typed() -> list[bytes]:
                # Messages that waited may go as one prompt, a line each, or one by one.
                return [line for line in re.split(rb"[\r\n]", out.read_bytes()) if line]

            await eventually(lambda: len(typed()) >= len(expected), timeout=60)
            assert typed() == expected
            events = await stack.store.events_after(agent, None, 100)
            assert [e.payload["text"] for e in events] == texts
    finally:
        await restarted.close()


async def test_the_typed_receipt_comes_through_the_gateway_restarted_before_the_message_was_typed(
    stack: Stack, telegram: FakeTelegram, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    await connected(stack, "telegram")
    tmux.new_session("keep")  # the tmux server runs; the agent's pane does not exist yet
    await register(stack, agent, tmux, "late:0.0", submit_delay_ms=0)
    first = telegram.human_says(CHAT, "typed after a restart")
    first_id = first["message"]["message_id"]
    await eventually(lambda: [r["emoji"] for r in telegram.reactions] == [["👀"]])

    # The gateway that queued it goes away before it is typed; a new one takes over.
    await stack.gateway.close()
    restarted = Gateway(stack.cfg, stack.client, stack.store, host=stack.host)
    await restarted.start()
    try:
        out = tmp_path / "late.bytes"
        out.touch()
        tmux.new_session("late", f"stty raw -echo; exec cat >> {out}")
        async with GatewayClient(stack.cfg.server.socket()) as rpc:
            # Registering again wakes the mailbox from its backoff.
            await rpc.call(
                "register", agent_id=agent, target="late:0.0", socket=tmux.socket, submit_delay_ms=0
            )
            await eventually(
                lambda: out.read_bytes() == b"[telegram:456 from Alice] typed after a restart\r"
            )
            await eventually(lambda: len(telegram.reactions) == 2)
            # A later message's receipts go out behind the first one's, in the same outbox: by
            # then a second "typed" receipt for the first would have arrived too.
            second = telegram.human_says(CHAT, "and one more")
            second_id = second["message"]["message_id"]
            await eventually(lambda: out.read_bytes().endswith(b"and one more\r"))
            await eventually(lambda: len(telegram.reactions) == 4)
    finally:
        await restarted.close()
    assert [(r["message_id"], r["emoji"]) for r in telegram.reactions] == [
        (first_id, ["👀"]),
        (first_id, ["✍"]),
        (second_id, ["👀"]),
        (second_id, ["✍"]),
    ]
    # The mailbox that asked for them replays, inside the sandbox, as it ran.
    mailbox = stack.client.get_workflow_handle(mailbox_id(agent))
    history = await eventually(lambda: settled_history(mailbox))
    await mailbox.terminate("test over")
    assert (await mailbox_replayer().replay_workflow(history)).replay_failure is None


async def test_a_queued_receipt_that_arrives_after_the_typed_one_is_not_sent(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    # The mailbox may type a message and ask for "typed" before the gateway's "queued" reaches
    # the outbox; sent after it, 👀 would replace ✍ on the human's message.
    await connected(stack, "telegram")
    telegram.known_chats.add(CHAT)
    receipt = functools.partial(
        receipt_item, "evt_early", provider="telegram", chat_id=str(CHAT), message_id="77"
    )
    await stack.gateway.outbox.post(agent, f"telegram:{CHAT}", receipt(stage="typed"))
    await stack.gateway.outbox.post(agent, f"telegram:{CHAT}", receipt(stage="queued"))
    # Sent in order behind both: once it is out, so is whatever was queued before it.
    result = await stack.call("reply", channel_id=f"telegram:{CHAT}", message="ok", agent_id=agent)
    assert result["status"] == "delivered", result
    assert [r["emoji"] for r in telegram.reactions] == [["✍"]]


async def _count(stack: Stack, agent: str, n: int) -> bool:
    return len(await stack.store.events_after(agent, None, 100)) == n


async def test_a_full_mailbox_refuses_a_chat_message_and_tells_the_sender(
    temporal_env: WorkflowEnvironment, tmp_path: Path, telegram: FakeTelegram, agent: str
) -> None:
    async with running_stack(
        temporal_env.client,
        tmp_path,
        mailbox=MailboxConfig(max_pending=1),
        configure=with_telegram(telegram, agent),
    ) as stack:
        await connected(stack, "telegram")
        await stack.call("send", agent_id=agent, message="already waiting")  # no pane yet
        sent = telegram.human_says(CHAT, "one more")
        [reply] = await eventually(lambda: telegram.texts_to(CHAT))
        assert reply.startswith(f"{agent}'s mailbox is full") and "not queued" in reply
        refused = provider_event_id("telegram", CHAT, sent["message"]["message_id"])
        assert await stack.store.get_event(refused) is None  # nothing accepted, nothing kept
        snapshot = await stack.gateway.mailbox.snapshot(agent)
        assert snapshot is not None and snapshot.pending == 1
