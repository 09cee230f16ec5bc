"""WhatsApp through Meta's Cloud API end to end: webhook calls signed as Meta signs them, our
sender posting to a local Graph API messages endpoint, real Temporal, tmux and SQLite."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from agentcomms.config import Config
from agentcomms.errors import RateLimited, SendRefused
from agentcomms.ids import provider_event_id
from agentcomms.transports import not_passed_on, split_text
from agentcomms.transports._whatsapp_cloud import (
    DEFAULT_RETRY_AFTER_S,
    SIGNATURE_HEADER,
    CloudSender,
)
from gateway.chat.inbox import ChatTransports
from tests.fakes.whatsapp_cloud import (
    ACCESS_TOKEN,
    APP_SECRET,
    VERIFY_TOKEN,
    FakeWhatsAppCloud,
    new_wamid,
)
from tests.support.chat import (
    ALICE,
    PUBLIC_URL,
    STRANGER,
    Hook,
    cloud_section,
    wamid_of,
)
from tests.support.stack import Stack, recording_pane
from tests.support.tmux import Tmux
from tests.support.waiting import eventually, typed


async def _answer_alice(stack: Stack, agent: str, text: str, asked: str) -> dict[str, Any]:
    """The agent's long reply to Alice, in answer to her message `asked`: the gateway's result."""
    result: dict[str, Any] = await stack.call(
        "reply",
        channel_id=f"whatsapp:{ALICE}",
        message=text,
        agent_id=agent,
        reply_to=asked,
        timeout=30,
    )
    return result


async def test_a_message_is_typed_once_even_when_meta_sends_the_webhook_again(
    cloud_stack: tuple[Stack, Hook],
    meta: FakeWhatsAppCloud,
    agent: str,
    tmux: Tmux,
    tmp_path: Path,
) -> None:
    stack, hook = cloud_stack
    out = await recording_pane(stack, agent, tmux, tmp_path)

    call = meta.incoming(ALICE, "ship it", name="Alice")
    answer = await hook.post(call)
    assert answer.status_code == 200
    # Answered only once durable: the event is already in the mailbox's projection.
    event_id = provider_event_id("whatsapp", ALICE, wamid_of(call))
    assert await stack.store.get_event(event_id) is not None
    assert (await hook.post(call)).status_code == 200  # Meta sends the call again

    await typed(out, f"[whatsapp:{ALICE} from Alice] ship it\r".encode())
    # Receipts are reactions on Alice's message: queued, then typed.
    await eventually(lambda: len(meta.reactions_to(ALICE)) == 2)
    assert meta.reactions_to(ALICE) == [(wamid_of(call), "👀"), (wamid_of(call), "✍")]
    assert [e.id for e in await stack.store.events_after(agent, None, 10)] == [event_id]
    assert meta.texts_to(ALICE) == []


async def test_the_verify_handshake_answers_only_the_right_token(
    cloud_stack: tuple[Stack, Hook], meta: FakeWhatsAppCloud
) -> None:
    _, hook = cloud_stack
    right = await meta.verify(hook.url, VERIFY_TOKEN)
    assert right.status_code == 200 and right.text == "1158201444"
    assert (await meta.verify(hook.url, "guess")).status_code == 403
    assert (await meta.verify(hook.url, VERIFY_TOKEN, mode="unsubscribe")).status_code == 403


async def test_a_forged_or_unsigned_webhook_gets_403_and_nothing_is_queued(
    cloud_stack: tuple[Stack, Hook], meta: FakeWhatsAppCloud, agent: str
) -> None:
    stack, hook = cloud_stack
    calls = [meta.incoming(ALICE, f"attempt {i}") for i in range(4)]
    body = b'{"object": "whatsapp_business_account"}'
    attempts = [
        await hook.post(calls[0], signature=None),
        await hook.post(calls[1], signature="sha256=" + "0" * 64),
        await hook.post(calls[2], signature=meta.sign(body, "not-the-app-secret")),
        # Signed right, but for another body: a call changed after Meta signed it.
        await hook.post(calls[3], signature=meta.sign(body)),
    ]
    assert [a.status_code for a in attempts] == [403, 403, 403, 403]
    for call in calls:
        event_id = provider_event_id("whatsapp", ALICE, wamid_of(call))
        assert await stack.store.get_event(event_id) is None
    assert await stack.store.events_after(agent, None, 10) == []
    assert meta.sent == []


async def test_status_callbacks_are_acknowledged_and_ignored(
    cloud_stack: tuple[Stack, Hook], meta: FakeWhatsAppCloud, agent: str
) -> None:
    stack, hook = cloud_stack
    answer = await hook.post(meta.status_update(ALICE, new_wamid(), "read"))
    assert answer.status_code == 200
    assert await stack.store.events_after(agent, None, 10) == []
    assert meta.sent == []


async def test_a_message_without_words_gets_a_short_reply_and_reaches_no_agent(
    cloud_stack: tuple[Stack, Hook], meta: FakeWhatsAppCloud, agent: str
) -> None:
    stack, hook = cloud_stack
    photo = meta.incoming(
        ALICE, None, message={"type": "image", "image": {"id": "1", "mime_type": "image/jpeg"}}
    )
    assert (await hook.post(photo)).status_code == 200
    await eventually(lambda: meta.texts_to(ALICE))
    assert meta.texts_to(ALICE) == [
        "Only text and voice notes reach the agent: this image was not passed on. "
        "Please send it as text."
    ]
    # The reply quotes the photo it is about.
    assert meta.sent[0]["context"] == {"message_id": wamid_of(photo)}
    assert await stack.store.events_after(agent, None, 10) == []


async def test_a_strangers_photo_gets_what_their_words_would_and_no_word_of_the_agent(
    cloud_stack: tuple[Stack, Hook], meta: FakeWhatsAppCloud, agent: str
) -> None:
    stack, hook = cloud_stack

    def photo(sender: str) -> dict[str, Any]:
        image = {"type": "image", "image": {"id": "1", "mime_type": "image/jpeg"}}
        return meta.incoming(sender, None, message=image)

    strangers = [photo(STRANGER), photo(STRANGER)]
    for call in strangers:
        assert (await hook.post(call)).status_code == 200
    assert (await hook.post(photo(ALICE))).status_code == 200

    # Alice, whom the gateway lets in, is told why her photo went nowhere; the stranger gets
    # what their words would have got: one pairing code, then silence.
    await eventually(lambda: meta.texts_to(ALICE) and meta.texts_to(STRANGER))
    assert meta.texts_to(ALICE) == [not_passed_on("image")]
    [answer] = meta.texts_to(STRANGER)
    assert "agentcomms pair " in answer, answer
    for call in strangers:
        event = await stack.store.get_event(provider_event_id("whatsapp", STRANGER, wamid_of(call)))
        assert event is not None and event.status == "rejected"
        assert event.payload["text"] == "[image not passed on]"
    assert [e.status for e in await stack.store.events_after(agent, None, 10)] == ["rejected"] * 2


async def test_a_stranger_is_rejected_and_recorded_until_paired(
    cloud_stack: tuple[Stack, Hook], meta: FakeWhatsAppCloud, agent: str
) -> None:
    stack, hook = cloud_stack
    first = meta.incoming(STRANGER, "let me in", name="Mallory")
    assert (await hook.post(first)).status_code == 200
    rejected = await stack.store.get_event(provider_event_id("whatsapp", STRANGER, wamid_of(first)))
    assert rejected is not None and rejected.status == "rejected"
    await eventually(lambda: meta.texts_to(STRANGER))
    [answer] = meta.texts_to(STRANGER)
    code = re.search(r"agentcomms pair (\w+)", answer)
    assert code, answer
    # Recorded for audit under the agent the chat maps to, and never for it to read.
    assert [e.status for e in await stack.store.events_after(agent, None, 10)] == ["rejected"]

    paired = await stack.call("pair", code=code[1], confirm=True)
    assert paired["sender_id"] == STRANGER and paired["agent_id"] == agent
    welcome = meta.incoming(STRANGER, "thanks", name="Mallory")
    assert (await hook.post(welcome)).status_code == 200
    admitted = await stack.store.get_event(
        provider_event_id("whatsapp", STRANGER, wamid_of(welcome))
    )
    assert admitted is not None and admitted.status != "rejected"
    assert admitted.agent_id == agent


async def test_an_agent_reply_quotes_its_message_and_is_split_after_429_and_500(
    cloud_stack: tuple[Stack, Hook], meta: FakeWhatsAppCloud, agent: str
) -> None:
    stack, _ = cloud_stack
    meta.fail_next(429, 500, retry_after=0.2)
    asked = new_wamid()
    long_text = "\n".join(f"line {i:04d}" for i in range(500))  # 5,499 characters
    result = await _answer_alice(stack, agent, long_text, asked)
    assert result["delivered"] is True, result
    pieces = meta.texts_to(ALICE)
    assert len(pieces) == 2 and "".join(pieces) == long_text
    assert meta.calls == 4  # 429, 500, then both pieces
    assert meta.sent[0]["context"] == {"message_id": asked}
    assert "context" not in meta.sent[1]
    assert meta.sent[0]["to"] == ALICE.lstrip("+")
    assert result["message_id"].startswith("wamid.")


@pytest.mark.parametrize("refused", [500, 429])
async def test_a_long_reply_refused_at_its_second_piece_arrives_with_each_piece_once(
    cloud_stack: tuple[Stack, Hook], meta: FakeWhatsAppCloud, agent: str, refused: int
) -> None:
    stack, _ = cloud_stack
    text = "\n".join(f"line {i:05d}" for i in range(1000))
    expected = split_text(text, 4096)
    assert len(expected) == 3
    meta.fail_next(refused, retry_after=0.2, after=1)
    asked = new_wamid()

    result = await _answer_alice(stack, agent, text, asked)

    assert result["delivered"] is True, result
    assert meta.texts_to(ALICE) == expected
    assert meta.calls == 4  # piece 1, the refusal, then pieces 2 and 3
    assert [m.get("context") for m in meta.sent] == [{"message_id": asked}, None, None]
    assert result["message_id"] == meta.sent[-1]["id"]


async def test_a_reply_waits_while_the_graph_api_is_down_and_goes_out_once_it_is_back(
    cloud_stack: tuple[Stack, Hook], meta: FakeWhatsAppCloud, agent: str
) -> None:
    stack, _ = cloud_stack
    await meta.server.stop()
    result = await stack.call(
        "reply", channel_id=f"whatsapp:{ALICE}", message="still there?", agent_id=agent, timeout=2
    )
    assert result["status"] == "queued", result  # durable, and not given up on
    await meta.server.start()
    await eventually(lambda: meta.texts_to(ALICE) == ["still there?"], timeout=30)


async def test_a_closed_24_hour_window_fails_at_once_saying_so(
    cloud_stack: tuple[Stack, Hook], meta: FakeWhatsAppCloud, agent: str
) -> None:
    stack, _ = cloud_stack
    meta.refuse_next(
        400,
        131047,
        "Re-engagement message",
        details="Message failed to send because more than 24 hours have passed since the "
        "customer last replied to this number.",
    )
    result = await stack.call(
        "reply", channel_id=f"whatsapp:{ALICE}", message="hello?", agent_id=agent, timeout=10
    )
    assert result["status"] == "failed", result
    assert "24-hour window closed" in result["error"] and "131047" in result["error"]
    assert meta.calls == 1  # not retried
    assert ACCESS_TOKEN not in result["error"]


async def test_the_typed_receipt_says_when_max_chars_cut_the_text(
    cloud_stack: tuple[Stack, Hook],
    meta: FakeWhatsAppCloud,
    agent: str,
    tmux: Tmux,
    tmp_path: Path,
) -> None:
    stack, hook = cloud_stack
    await recording_pane(stack, agent, tmux, tmp_path, max_chars=100)
    call = meta.incoming(ALICE, "x" * 300, name="Alice")
    assert (await hook.post(call)).status_code == 200
    await eventually(lambda: meta.texts_to(ALICE))
    [note] = meta.texts_to(ALICE)
    assert note.startswith(
        "Typed into the agent's terminal, but cut at the agent's max_chars (100)"
    )
    assert (wamid_of(call), "✍") in meta.reactions_to(ALICE)
    assert next(m for m in meta.sent if m["type"] == "text")["context"] == {
        "message_id": wamid_of(call)
    }


async def test_the_sender_maps_meta_errors_to_what_to_do(
    meta: FakeWhatsAppCloud, tmp_path: Path
) -> None:
    cfg = Config()
    cfg = cfg.model_copy(
        update={
            "chat": cfg.chat.model_copy(
                update={"whatsapp": cfg.chat.whatsapp.model_copy(update=cloud_section(meta))}
            )
        }
    )
    sender = CloudSender(cfg)
    # Meta gives no Retry-After: a sane wait is assumed.
    meta.fail_next(429)
    with pytest.raises(RateLimited) as limited:
        await sender.send_text(ALICE, "hi")
    assert limited.value.retry_after == DEFAULT_RETRY_AFTER_S
    meta.refuse_next(
        400, 131056, "(#131056) (Business Account, Consumer Account) pair rate limit hit"
    )
    with pytest.raises(RateLimited):
        await sender.send_text(ALICE, "hi")

    meta.fail_next(401)
    with pytest.raises(SendRefused, match="access_token") as expired:
        await sender.send_text(ALICE, "hi")
    meta.refuse_next(400, 131030, "Recipient phone number not in allowed list")
    with pytest.raises(SendRefused, match="allowed list") as not_allowed:
        await sender.send_text(ALICE, "hi")
    wrong_id = CloudSender(
        cfg.model_copy(
            update={
                "chat": cfg.chat.model_copy(
                    update={
                        "whatsapp": cfg.chat.whatsapp.model_copy(
                            update=cloud_section(meta, phone_number_id="999")
                        )
                    }
                )
            }
        )
    )
    with pytest.raises(SendRefused, match="phone_number_id"):
        await wrong_id.send_text(ALICE, "hi")
    for refusal in (expired.value, not_allowed.value):
        assert ACCESS_TOKEN not in str(refusal) and APP_SECRET not in str(refusal)
    assert meta.sent == []


async def test_status_says_what_to_fix_when_the_webhook_cannot_work(
    meta: FakeWhatsAppCloud,
) -> None:
    base = Config()
    half = base.chat.whatsapp.model_copy(
        update=cloud_section(meta, app_secret=None, verify_token=None)
    )
    cfg = base.model_copy(update={"chat": base.chat.model_copy(update={"whatsapp": half})})
    chat = ChatTransports(cfg, sink=None)  # type: ignore[arg-type]  # nothing arrives here
    await chat.start()
    [row] = [r for r in chat.statuses() if r["name"] == "whatsapp"]
    assert row["status"] == "failed"
    for key in ("chat.whatsapp.app_secret", "chat.whatsapp.verify_token", "server.public_url"):
        assert key in row["error"]
    # Served all the same, and refusing everyone: nothing can be checked without the keys.
    app = Starlette(routes=chat.routes())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
        url = "http://gateway/webhooks/whatsapp"
        handshake = await client.get(
            url, params={"hub.mode": "subscribe", "hub.verify_token": "", "hub.challenge": "1"}
        )
        body = json.dumps(meta.incoming(ALICE, "hi")).encode()
        unsigned = await client.post(
            url, content=body, headers={SIGNATURE_HEADER: meta.sign(body, "")}
        )
    assert (handshake.status_code, unsigned.status_code) == (403, 403)

    complete = cfg.model_copy(
        update={
            "chat": cfg.chat.model_copy(
                update={"whatsapp": half.model_copy(update=cloud_section(meta))}
            ),
            "server": cfg.server.model_copy(update={"public_url": PUBLIC_URL}),
        }
    )
    chat = ChatTransports(complete, sink=None)  # type: ignore[arg-type]
    await chat.start()
    [row] = [r for r in chat.statuses() if r["name"] == "whatsapp"]
    assert row == {"name": "whatsapp", "status": "connected"}
