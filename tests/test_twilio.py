"""SMS and WhatsApp through Twilio end to end: webhooks signed as Twilio signs them (for the
public URL, which differs from where the gateway listens), the real `twilio` SDK sending to a
local Messages API, real Temporal, tmux and SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config
from agentcomms.ids import provider_event_id
from agentcomms.transports import not_passed_on, sms
from tests.fakes.serve import free_port
from tests.fakes.twilio import OUR_NUMBER, FakeTwilio
from tests.support.chat import ALICE, PHOTO, PUBLIC_URL, Hooks, with_twilio
from tests.support.sinks import TakesNoPresses
from tests.support.stack import Stack, recording_pane, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually


async def test_an_sms_is_typed_once_even_when_twilio_retries_the_webhook(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    stack, hooks = twilio_stack
    out = await recording_pane(stack, agent, tmux, tmp_path)

    form = twilio.incoming(ALICE, "ship it")
    answer = await hooks.post("sms", form)
    assert answer.status_code == 200 and "<Message>" not in answer.text
    # Answered only once durable: the event is already in the mailbox's projection.
    event_id = provider_event_id("sms", ALICE, form["MessageSid"])
    assert await stack.store.get_event(event_id) is not None
    again = await hooks.post("sms", form)  # Twilio retries (it saw a timeout)
    assert again.status_code == 200

    await eventually(lambda: out.read_bytes() == f"[sms:{ALICE} from {ALICE}] ship it\r".encode())
    # No reactions over SMS: a receipt is a text, and billed, so by default only "typed" goes
    # (a "queued" one would have been sent before it, from the same outbox).
    await eventually(lambda: twilio.bodies_to(ALICE))
    assert twilio.bodies_to(ALICE) == ["✓ typed into the agent's terminal"]
    assert [e.id for e in await stack.store.events_after(agent, None, 10)] == [event_id]
    assert out.read_bytes() == f"[sms:{ALICE} from {ALICE}] ship it\r".encode()


async def test_the_typed_receipt_says_when_the_agents_max_chars_cut_the_text(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    stack, hooks = twilio_stack
    await recording_pane(stack, agent, tmux, tmp_path, max_chars=100)
    await hooks.texts(ALICE, "y" * 300)
    [typed] = await eventually(lambda: twilio.bodies_to(ALICE))
    assert typed.startswith(
        "✓ typed into the agent's terminal, but cut at the agent's max_chars (100): "
    ), typed


async def test_receipts_both_texts_queued_and_typed_and_none_texts_nothing(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio: FakeTwilio, agent: str, tmux: Tmux
) -> None:
    port = free_port()
    configure = with_twilio(twilio, agent, port, receipts={"sms": "both", "whatsapp": "none"})
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        hooks = Hooks(twilio, port)
        # Both arrive before the agent has a pane: queued first, typed once it registers.
        await hooks.texts(ALICE, "by whatsapp", whatsapp=True, profile_name="Alice")
        await hooks.texts(ALICE, "by sms")
        await eventually(lambda: twilio.bodies_to(ALICE) == ["✓ queued for the agent"])
        out = await recording_pane(stack, agent, tmux, tmp_path)
        await eventually(lambda: out.read_bytes().endswith(b"by sms\r"))
        # The mailbox asks for receipts in the order it types: the WhatsApp one came first.
        await eventually(lambda: len(twilio.bodies_to(ALICE)) == 2)
        # A reply goes out behind whatever receipt was queued before it on its chat.
        for channel in (f"sms:{ALICE}", f"whatsapp:{ALICE}"):
            sent = await stack.call("reply", channel_id=channel, message="ok", agent_id=agent)
            assert sent["status"] == "delivered", sent
    assert twilio.bodies_to(ALICE) == [
        "✓ queued for the agent",
        "✓ typed into the agent's terminal",
        "ok",
    ]
    assert twilio.bodies_to(f"whatsapp:{ALICE}") == ["ok"]


async def test_a_forged_or_unsigned_webhook_gets_403_and_nothing_is_queued(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio, agent: str
) -> None:
    stack, hooks = twilio_stack
    forms = [twilio.incoming(ALICE, f"attempt {i}") for i in range(4)]
    local_path_url = f"http://127.0.0.1:{hooks.port}/webhooks/twilio/sms"
    attempts = [
        await hooks.post("sms", forms[0], signature=None),
        await hooks.post("sms", forms[1], signature="bm90IGEgc2lnbmF0dXJl"),
        # Signed with the wrong token, and signed for the local URL instead of the public one.
        await hooks.post("sms", forms[2], signature=twilio.signature(PUBLIC_URL, forms[2], "x")),
        await hooks.post("sms", forms[3], signature=twilio.signature(local_path_url, forms[3])),
    ]
    assert [a.status_code for a in attempts] == [403, 403, 403, 403]
    # A body changed after signing is forged too.
    signed = twilio.incoming(ALICE, "harmless")
    signature = twilio.signature(PUBLIC_URL + "/webhooks/twilio/sms", signed)
    tampered = await hooks.post("sms", {**signed, "Body": "rm -rf /"}, signature=signature)
    assert tampered.status_code == 403
    for form in [*forms, signed]:
        assert (
            await stack.store.get_event(provider_event_id("sms", ALICE, form["MessageSid"])) is None
        )
    assert await stack.store.events_after(agent, None, 10) == []
    assert twilio.sent == []


async def test_a_stranger_gets_a_pairing_code_in_the_answer(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio
) -> None:
    stack, hooks = twilio_stack
    stranger = "+15559990000"
    form = twilio.incoming(stranger, "who is this?")
    answer = await hooks.post("sms", form)
    assert answer.status_code == 200 and "agentcomms pair " in answer.text
    event = await stack.store.get_event(provider_event_id("sms", stranger, form["MessageSid"]))
    assert event is not None and event.status == "rejected"
    second = await hooks.post("sms", twilio.incoming(stranger, "hello?"))
    assert "<Message>" not in second.text  # answered once


async def test_a_strangers_photo_gets_what_their_words_would_and_only_alice_is_told_why(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio
) -> None:
    # Every answer is a text the operator pays for, and a stranger learns nothing of the agent:
    # a photo from them is rejected and recorded as their words would be, answered once.
    stack, hooks = twilio_stack
    stranger = "+15559990000"
    for flavour in ("sms", "whatsapp"):
        photos = [
            twilio.incoming(
                stranger, "", whatsapp=flavour == "whatsapp", media=[(PHOTO, "image/jpeg")]
            )
            for _ in range(2)
        ]
        first, second = [await hooks.post(flavour, photo) for photo in photos]
        assert first.status_code == 200 and second.status_code == 200
        assert "agentcomms pair " in first.text and "Only text" not in first.text, first.text
        assert "<Message>" not in second.text, second.text
        for photo in photos:
            event = await stack.store.get_event(
                provider_event_id(flavour, stranger, photo["MessageSid"])
            )
            assert event is not None and event.status == "rejected"
            assert event.payload["text"] == "[image not passed on]"

    # A sender the gateway lets in is still told why their photo went nowhere.
    answer = await hooks.post("sms", twilio.incoming(ALICE, "", media=[(PHOTO, "image/jpeg")]))
    assert f"<Message>{not_passed_on('image')}</Message>" in answer.text
    assert twilio.sent == [] and twilio.media_asked == []


async def test_an_agent_reply_reaches_sms_after_429_and_500(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio, agent: str
) -> None:
    stack, _ = twilio_stack
    twilio.fail_next(429, 500)
    result = await stack.call(
        "reply", channel_id=f"sms:{ALICE}", message="deployed", agent_id=agent
    )
    assert result["delivered"] is True, result
    assert twilio.bodies_to(ALICE) == ["deployed"] and twilio.calls == 3
    assert twilio.sent[0]["from"] == OUR_NUMBER

    twilio.fail_next(400)  # Twilio: not a valid phone number
    refused = await stack.call("reply", channel_id="sms:12", message="x", agent_id=agent, timeout=5)
    assert refused["status"] == "failed" and "21211" in refused["error"], refused


async def test_whatsapp_both_ways(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    stack, hooks = twilio_stack
    out = await recording_pane(stack, agent, tmux, tmp_path)
    await hooks.texts(ALICE, "status?", whatsapp=True, profile_name="Alice")
    await eventually(
        lambda: out.read_bytes() == f"[whatsapp:{ALICE} from Alice] status?\r".encode()
    )
    result = await stack.call(
        "reply", channel_id=f"whatsapp:{ALICE}", message="all green", agent_id=agent
    )
    assert result["delivered"] is True, result
    assert "all green" in twilio.bodies_to(f"whatsapp:{ALICE}")
    assert (
        next(m for m in twilio.sent if m["body"] == "all green")["from"] == f"whatsapp:{OUR_NUMBER}"
    )


class Unreachable(TakesNoPresses):
    """The gateway's intake while Temporal cannot be reached: nothing can be made durable."""

    def __init__(self) -> None:
        self.offered: list[str] = []

    async def accept(self, message: Any) -> Any:
        self.offered.append(message.text)
        raise RuntimeError("Temporal at 127.0.0.1:7233 did not answer (UNAVAILABLE)")


async def test_a_message_that_cannot_be_kept_is_answered_so_its_sender_sends_it_again(
    twilio: FakeTwilio, agent: str
) -> None:
    # Twilio posts a message once: a 503 would lose it without anyone knowing.
    cfg = with_twilio(twilio, agent, free_port())(Config())
    intake = Unreachable()
    app = Starlette(routes=sms.receiver(cfg, intake).routes())
    form = twilio.incoming(ALICE, "deploy now")
    path = "/webhooks/twilio/sms"
    headers = {"X-Twilio-Signature": twilio.signature(PUBLIC_URL + path, form)}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
        answer = await client.post(f"http://gateway{path}", data=form, headers=headers)
    assert intake.offered == ["deploy now"]
    assert answer.status_code == 200
    assert "<Message>Not delivered: agentcomms could not take your message" in answer.text
    assert "send it again" in answer.text
