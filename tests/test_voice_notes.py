"""Voice notes in chat, end to end: a phone's Ogg/Opus recording (espeak-ng's voice) sent on
Telegram (the real python-telegram-bot against a local Bot API), WhatsApp (Meta's Cloud API), or
WhatsApp and SMS through Twilio (a signed webhook listing the media, fetched with basic auth and
a redirect), fetched through the provider's file API, heard by the STT chain (Deepgram's real SDK against its
fake, or pocketsphinx offline within a grammar), and typed into a real tmux pane marked as
transcribed; on a real Temporal dev server and SQLite."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, SpeechAccount, STTConfig, VoiceConfig
from agentcomms.ids import provider_event_id
from mcp_server import build_server
from tests.fakes import deepgram as dg
from tests.fakes.deepgram import FakeDeepgram
from tests.fakes.serve import free_port
from tests.fakes.telegram import FakeTelegram
from tests.fakes.twilio import FakeTwilio
from tests.fakes.whatsapp_cloud import FakeWhatsAppCloud
from tests.support.chat import (
    ALICE,
    CHAT,
    PHOTO,
    STRANGER,
    Hook,
    Hooks,
    connected,
    wamid_of,
    with_cloud,
    with_telegram,
    with_twilio,
)
from tests.support.mcp import call
from tests.support.stack import Stack, recording_pane, running_stack
from tests.support.tmux import Tmux
from tests.support.voice import voice_note, write_grammar
from tests.support.waiting import eventually, typed

PHRASES = ["ship it on friday", "run the tests", "deploy to staging"]


@pytest.fixture
def grammar(tmp_path: Path) -> Path:
    return write_grammar(tmp_path / "answers.gram", PHRASES)


@pytest.fixture(scope="module")
async def ship_it() -> bytes:
    return await voice_note("ship it on friday")


def with_deepgram(tmp_path: Path, deepgram: FakeDeepgram) -> VoiceConfig:
    """Deepgram first (the seed's STT provider), local after it."""
    return VoiceConfig(
        audio_dir=tmp_path / "audio",
        deepgram=SpeechAccount(api_key=SecretStr(dg.API_KEY), base_url=deepgram.base_url),
    )


def offline(tmp_path: Path, grammar: Path) -> VoiceConfig:
    """No speech account at all: the local recognizer, within a grammar."""
    return VoiceConfig(audio_dir=tmp_path / "audio", stt=STTConfig(grammar=grammar))


def telegram_hearing(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    agent: str,
    voice: VoiceConfig,
    *,
    channels: dict[str, str] | None = None,
) -> AbstractAsyncContextManager[Stack]:
    """Telegram's chat ``CHAT`` (or ``channels``) mapped to ``agent``; Alice alone allowed; voice
    notes heard as ``voice`` says."""
    return running_stack(
        temporal_env.client,
        tmp_path,
        voice=voice,
        configure=with_telegram(telegram, agent, channels=channels),
    )


async def telegram_pane(stack: Stack, agent: str, tmux: Tmux, tmp_path: Path) -> Path:
    """The agent registered on a recorder pane, Telegram connected: the file the pane writes."""
    out = await recording_pane(stack, agent, tmux, tmp_path)
    await connected(stack, "telegram")
    return out


@pytest.fixture
async def deepgram_chat(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    deepgram: FakeDeepgram,
    agent: str,
    tmux: Tmux,
) -> AsyncIterator[tuple[Stack, Path]]:
    """Telegram, Deepgram then local, the agent on a recorder pane: the stack, the pane's file."""
    voice = with_deepgram(tmp_path, deepgram)
    async with telegram_hearing(temporal_env, tmp_path, telegram, agent, voice) as stack:
        yield stack, await telegram_pane(stack, agent, tmux, tmp_path)


async def call_tool(stack: Stack, agent: str, tool: str, **args: Any) -> Any:
    """An MCP tool, called as ``agent`` through the in-memory client."""
    return await call(build_server(stack.cfg.server.socket(), default_agent=agent), tool, **args)


def _event_id(chat: int, update: dict[str, Any]) -> str:
    return provider_event_id("telegram", chat, update["message"]["message_id"])


async def _event(stack: Stack, chat: int, update: dict[str, Any]) -> Any:
    return await eventually(lambda: stack.store.get_event(_event_id(chat, update)))


# ---- Telegram ------------------------------------------------------------------------------------


async def test_a_telegram_voice_note_is_heard_by_deepgram_and_typed_marked_as_transcribed(
    deepgram_chat: tuple[Stack, Path],
    telegram: FakeTelegram,
    deepgram: FakeDeepgram,
    agent: str,
    ship_it: bytes,
) -> None:
    stack, out = deepgram_chat
    deepgram.transcripts.append("Ship it on Friday.")

    update = telegram.human_sends_voice(CHAT, ship_it, duration=2)

    await eventually(
        lambda: (
            out.read_bytes()
            == b"[telegram:456 from Alice, voice note transcribed] Ship it on Friday.\r"
        )
    )
    # Fetched through the Bot API's getFile and file URL, once; heard once, as a WAV.
    assert telegram.calls.count("getFile") == 1 and len(telegram.downloads) == 1
    assert [h["container"] for h in deepgram.heard] == ["wav"]
    event = await _event(stack, CHAT, update)
    assert event.payload["text"] == "Ship it on Friday."
    assert event.payload["transcribed"] is True
    assert event.payload["stt_provider"] == "deepgram"
    # The recording is kept beside call audio, as it came.
    kept = stack.cfg.voice.audio_root() / event.payload["audio"]
    assert kept.read_bytes() == ship_it
    # Receipts as for text: queued, then typed.
    await eventually(lambda: len(telegram.reactions) == 2)
    # check_messages (MCP) says the words were heard, not typed.
    [message] = (await call_tool(stack, agent, "check_messages"))["messages"]
    assert message["text"] == "Ship it on Friday." and message["transcribed"] is True


async def test_offline_the_local_recognizer_hears_a_telegram_voice_note_within_a_grammar(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    agent: str,
    tmux: Tmux,
    grammar: Path,
) -> None:
    async with telegram_hearing(
        temporal_env, tmp_path, telegram, agent, offline(tmp_path, grammar)
    ) as stack:
        out = await telegram_pane(stack, agent, tmux, tmp_path)

        update = telegram.human_sends_voice(CHAT, await voice_note("run the tests"))

        await eventually(
            lambda: (
                out.read_bytes()
                == b"[telegram:456 from Alice, voice note transcribed] run the tests\r"
            )
        )
        event = await _event(stack, CHAT, update)
        assert event.payload["stt_provider"] == "local"
        assert 0.5 < event.payload["duration_s"] < 5  # decoded from the Ogg/Opus itself


async def test_a_strangers_voice_note_is_rejected_without_being_fetched_or_transcribed(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    deepgram: FakeDeepgram,
    agent: str,
    ship_it: bytes,
) -> None:
    stranger = 999
    channels = {f"telegram:{CHAT}": agent, f"telegram:{stranger}": agent}
    voice = with_deepgram(tmp_path, deepgram)
    async with telegram_hearing(
        temporal_env, tmp_path, telegram, agent, voice, channels=channels
    ) as stack:
        await connected(stack, "telegram")

        update = telegram.human_sends_voice(stranger, ship_it, first_name="Mallory")

        event = await _event(stack, stranger, update)
        assert event.status == "rejected" and "not allowed" in (event.error or "")
        assert event.payload["voice_note"] is True
        await eventually(lambda: telegram.texts_to(stranger))
        assert "agentcomms pair" in telegram.texts_to(stranger)[0]
        # No STT spent, not even a download.
        assert deepgram.heard == [] and deepgram.authorizations == []
        assert "getFile" not in telegram.calls and telegram.downloads == []
        assert (await stack.call("check_messages", agent_id=agent))["messages"] == []


async def test_a_voice_note_no_provider_can_hear_is_answered_and_recorded_not_typed(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    deepgram: FakeDeepgram,
    agent: str,
    tmux: Tmux,
    grammar: Path,
) -> None:
    voice = with_deepgram(tmp_path, deepgram).model_copy(
        update={"stt": STTConfig(grammar=tmp_path / "missing.gram")}
    )
    async with telegram_hearing(temporal_env, tmp_path, telegram, agent, voice) as stack:
        out = await telegram_pane(stack, agent, tmux, tmp_path)
        deepgram.fail_next(500)  # Deepgram is down; the local recognizer cannot start

        update = telegram.human_sends_voice(CHAT, await voice_note("deploy to staging"))

        await eventually(lambda: telegram.texts_to(CHAT))
        [reply] = telegram.texts_to(CHAT)
        assert reply.startswith("Could not transcribe your voice note: deepgram:"), reply
        assert "voice.stt.grammar" in reply and reply.endswith("Please send it as text.")
        assert dg.API_KEY not in reply
        event = await _event(stack, CHAT, update)
        assert event.status == "rejected" and event.agent_id == agent
        assert (event.error or "").startswith("voice note not transcribed: deepgram:")
        assert event.payload["text"] == "[voice note, not transcribed]"
        # Kept to be listened to; never typed, never shown to the agent as words.
        assert (stack.cfg.voice.audio_root() / event.payload["audio"]).is_file()
        telegram.human_says(CHAT, "sent it as text")
        await eventually(lambda: out.read_bytes() == b"[telegram:456 from Alice] sent it as text\r")
        [message] = (await stack.call("check_messages", agent_id=agent))["messages"]
        assert message["payload"]["text"] == "sent it as text"


async def test_a_voice_note_delivered_twice_is_one_event_heard_once_and_typed_once(
    deepgram_chat: tuple[Stack, Path],
    telegram: FakeTelegram,
    deepgram: FakeDeepgram,
    agent: str,
    ship_it: bytes,
) -> None:
    stack, out = deepgram_chat
    deepgram.transcripts.extend(["ship it on friday", "again"])

    update = telegram.human_sends_voice(CHAT, ship_it)
    prefix = b"[telegram:456 from Alice, voice note transcribed] "
    await eventually(lambda: out.read_bytes() == prefix + b"ship it on friday\r")
    telegram.deliver(update)  # Telegram sends it again, as after a restart
    telegram.human_says(CHAT, "after")
    await eventually(lambda: out.read_bytes().endswith(b"after\r"))

    assert out.read_bytes() == prefix + b"ship it on friday\r[telegram:456 from Alice] after\r"
    assert len(deepgram.heard) == 1 and len(telegram.downloads) == 1
    events = await stack.store.events_after(agent, None, 100)
    assert [e.payload["text"] for e in events] == ["ship it on friday", "after"]


async def test_a_voice_note_over_ten_minutes_is_refused_before_download(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    deepgram: FakeDeepgram,
    agent: str,
    ship_it: bytes,
) -> None:
    async with telegram_hearing(
        temporal_env, tmp_path, telegram, agent, with_deepgram(tmp_path, deepgram)
    ) as stack:
        await connected(stack, "telegram")

        update = telegram.human_sends_voice(CHAT, ship_it, duration=11 * 60)

        await eventually(lambda: telegram.texts_to(CHAT))
        assert "more than the 10 minutes" in telegram.texts_to(CHAT)[0]
        event = await _event(stack, CHAT, update)
        assert event.status == "rejected"
        assert telegram.downloads == [] and deepgram.heard == []


async def test_while_a_voice_note_is_heard_other_chats_go_on_and_telegram_keeps_it_until_kept(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    deepgram: FakeDeepgram,
    agent: str,
    tmux: Tmux,
    ship_it: bytes,
) -> None:
    group = -100123  # Alice writes in a group mapped to the same agent, too
    channels = {f"telegram:{CHAT}": agent, f"telegram:{group}": agent}
    voice = with_deepgram(tmp_path, deepgram)
    async with telegram_hearing(
        temporal_env, tmp_path, telegram, agent, voice, channels=channels
    ) as stack:
        out = await telegram_pane(stack, agent, tmux, tmp_path)
        deepgram.transcripts.append("ship it on friday")
        deepgram.hold = asyncio.Event()  # Deepgram takes as long as the test likes
        try:
            note = telegram.human_sends_voice(CHAT, ship_it)
            await eventually(lambda: deepgram.heard)  # being heard now
            after = telegram.human_says(CHAT, "and tag it")
            elsewhere = b"[telegram:-100123 from Alice] build is green\r"
            telegram.human_says(group, "build is green", user_id=CHAT, chat_type="group")

            # The poll went on: another chat's message is typed while the note is heard.
            await typed(out, elsewhere)
            # The note is not kept yet, so Telegram was never told to forget it, and the text
            # after it in its chat waits behind it.
            assert all(o is None or o <= note["update_id"] for o in telegram.offsets)
            assert note["update_id"] in [u["update_id"] for u in telegram.updates]
            assert await stack.store.get_event(_event_id(CHAT, note)) is None
            assert await stack.store.get_event(_event_id(CHAT, after)) is None
        finally:
            deepgram.hold.set()

        # Then the note and the text after it, in the order the human sent them.
        await typed(
            out,
            elsewhere
            + b"[telegram:456 from Alice, voice note transcribed] ship it on friday\r"
            + b"[telegram:456 from Alice] and tag it\r",
        )
        # Kept, so confirmed: the poll's offset moves past both.
        await eventually(lambda: (telegram.offsets[-1] or 0) > after["update_id"])


async def test_a_voice_note_not_kept_comes_again_and_the_text_after_it_does_not_overtake_it(
    deepgram_chat: tuple[Stack, Path],
    telegram: FakeTelegram,
    deepgram: FakeDeepgram,
    agent: str,
    ship_it: bytes,
) -> None:
    stack, out = deepgram_chat
    deepgram.transcripts.append("ship it on friday")
    telegram.fail_next("getFile", 500)  # the note cannot be fetched this time: not kept

    telegram.human_sends_voice(CHAT, ship_it)
    telegram.human_says(CHAT, "and tag it")

    await typed(
        out,
        b"[telegram:456 from Alice, voice note transcribed] ship it on friday\r"
        b"[telegram:456 from Alice] and tag it\r",
    )
    assert telegram.calls.count("getFile") == 2 and len(deepgram.heard) == 1
    events = await stack.store.events_after(agent, None, 10)
    assert [e.payload["text"] for e in events] == ["ship it on friday", "and tag it"]


# ---- WhatsApp (Meta's Cloud API) -----------------------------------------------------------------


def webhook_stack(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    voice: VoiceConfig,
    configure: Callable[[int], Callable[[Config], Config]],
) -> tuple[AbstractAsyncContextManager[Stack], int]:
    """A stack whose gateway takes webhooks on a free port (``configure(port)`` says so)."""
    port = free_port()
    stack = running_stack(temporal_env.client, tmp_path, voice=voice, configure=configure(port))
    return stack, port


def whatsapp_hearing(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    meta: FakeWhatsAppCloud,
    agent: str,
    voice: VoiceConfig,
) -> tuple[AbstractAsyncContextManager[Stack], Hook]:
    stack, port = webhook_stack(
        temporal_env, tmp_path, voice, lambda port: with_cloud(meta, agent, port)
    )
    return stack, Hook(meta, port)


@pytest.fixture
async def deepgram_whatsapp(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    meta: FakeWhatsAppCloud,
    deepgram: FakeDeepgram,
    agent: str,
) -> AsyncIterator[tuple[Stack, Hook]]:
    """WhatsApp's Cloud API heard by Deepgram then local: the stack, Meta's side of its webhook."""
    running, hook = whatsapp_hearing(
        temporal_env, tmp_path, meta, agent, with_deepgram(tmp_path, deepgram)
    )
    async with running as stack:
        yield stack, hook


async def test_a_whatsapp_voice_note_is_fetched_from_the_graph_api_and_typed_as_transcribed(
    deepgram_whatsapp: tuple[Stack, Hook],
    meta: FakeWhatsAppCloud,
    deepgram: FakeDeepgram,
    agent: str,
    tmux: Tmux,
    ship_it: bytes,
    tmp_path: Path,
) -> None:
    stack, hook = deepgram_whatsapp
    out = await recording_pane(stack, agent, tmux, tmp_path)
    deepgram.transcripts.append("Ship it on Friday.")

    call = meta.voice_note(ALICE, ship_it, name="Alice")
    answer = await hook.post(call)

    # Answered only once heard and durable.
    assert answer.status_code == 200
    event = await stack.store.get_event(provider_event_id("whatsapp", ALICE, wamid_of(call)))
    assert event is not None and event.payload["transcribed"] is True
    [media_id] = meta.media
    assert meta.media_asked == [media_id] and meta.downloads == [media_id]
    assert [h["container"] for h in deepgram.heard] == ["wav"]
    await typed(
        out,
        f"[whatsapp:{ALICE} from Alice, voice note transcribed] Ship it on Friday.\r".encode(),
    )
    # Meta sends the call again: one event, not heard twice.
    assert (await hook.post(call)).status_code == 200
    assert len(deepgram.heard) == 1 and meta.downloads == [media_id]
    assert [e.id for e in await stack.store.events_after(agent, None, 10)] == [event.id]
    [message] = (await call_tool(stack, agent, "check_messages"))["messages"]
    assert message["transcribed"] is True and message["provider"] == "whatsapp"


async def test_offline_a_whatsapp_voice_note_is_heard_by_the_local_recognizer(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    meta: FakeWhatsAppCloud,
    agent: str,
    tmux: Tmux,
    grammar: Path,
) -> None:
    running, hook = whatsapp_hearing(
        temporal_env, tmp_path, meta, agent, offline(tmp_path, grammar)
    )
    async with running as stack:
        out = await recording_pane(stack, agent, tmux, tmp_path)

        call = meta.voice_note(ALICE, await voice_note("deploy to staging"), name="Alice")
        assert (await hook.post(call)).status_code == 200

        await typed(
            out,
            f"[whatsapp:{ALICE} from Alice, voice note transcribed] deploy to staging\r".encode(),
        )


async def test_a_whatsapp_strangers_voice_note_is_never_fetched_nor_heard(
    deepgram_whatsapp: tuple[Stack, Hook],
    meta: FakeWhatsAppCloud,
    deepgram: FakeDeepgram,
    agent: str,
    ship_it: bytes,
) -> None:
    stack, hook = deepgram_whatsapp
    call = meta.voice_note(STRANGER, ship_it, name="Mallory")
    assert (await hook.post(call)).status_code == 200

    event = await stack.store.get_event(provider_event_id("whatsapp", STRANGER, wamid_of(call)))
    assert event is not None and event.status == "rejected"
    await eventually(lambda: meta.texts_to(STRANGER))
    assert "agentcomms pair" in meta.texts_to(STRANGER)[0]
    assert meta.media_asked == [] and meta.downloads == []
    assert deepgram.heard == [] and deepgram.authorizations == []


async def test_a_whatsapp_voice_note_meta_cannot_serve_now_is_not_acknowledged(
    deepgram_whatsapp: tuple[Stack, Hook],
    meta: FakeWhatsAppCloud,
    deepgram: FakeDeepgram,
    agent: str,
    tmux: Tmux,
    ship_it: bytes,
    tmp_path: Path,
) -> None:
    stack, hook = deepgram_whatsapp
    out = await recording_pane(stack, agent, tmux, tmp_path)
    deepgram.transcripts.append("ship it on friday")
    call = meta.voice_note(ALICE, ship_it, name="Alice")
    [media_id] = meta.media
    audio = meta.media.pop(media_id)
    meta.fail_media = True

    # The media lookup fails for now (Meta's 5xx): not kept, so Meta sends the call again.
    answer = await hook.post(call)
    assert answer.status_code == 503
    assert await stack.store.get_event(provider_event_id("whatsapp", ALICE, wamid_of(call))) is None

    meta.fail_media = False
    meta.media[media_id] = audio
    assert (await hook.post(call)).status_code == 200
    await typed(
        out,
        f"[whatsapp:{ALICE} from Alice, voice note transcribed] ship it on friday\r".encode(),
    )


# ---- WhatsApp and SMS through Twilio -------------------------------------------------------------


def twilio_hearing(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    twilio: FakeTwilio,
    agent: str,
    voice: VoiceConfig,
) -> tuple[AbstractAsyncContextManager[Stack], Hooks]:
    stack, port = webhook_stack(
        temporal_env, tmp_path, voice, lambda port: with_twilio(twilio, agent, port)
    )
    return stack, Hooks(twilio, port)


@pytest.mark.parametrize("flavour", ["whatsapp", "sms"])
async def test_offline_a_voice_note_through_twilio_is_fetched_heard_and_typed_as_transcribed(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    twilio: FakeTwilio,
    agent: str,
    tmux: Tmux,
    grammar: Path,
    flavour: str,
) -> None:
    running, hooks = twilio_hearing(
        temporal_env, tmp_path, twilio, agent, offline(tmp_path, grammar)
    )
    async with running as stack:
        out = await recording_pane(stack, agent, tmux, tmp_path)
        note = await voice_note("deploy to staging")
        form = twilio.incoming(
            ALICE, "", whatsapp=flavour == "whatsapp", media=[(note, "audio/ogg")]
        )
        twilio.media_failures.append(503)  # Twilio stumbles once: asked again, not refused

        answer = await hooks.post(flavour, form)

        # Answered only once heard and durable, with nothing to say to the human.
        assert answer.status_code == 200 and "<Message>" not in answer.text
        event = await stack.store.get_event(provider_event_id(flavour, ALICE, form["MessageSid"]))
        assert event is not None and event.status != "rejected", event
        assert event.payload["transcribed"] is True and event.payload["stt_provider"] == "local"
        # The media URL was asked with the account's credentials (twice: it failed once); the
        # CDN it redirects to got the file's request without them.
        [media_sid] = twilio.media
        assert twilio.media_asked == [(media_sid, True), (media_sid, True)]
        [download] = twilio.cdn_requests
        assert "authorization" not in download
        assert (stack.cfg.voice.audio_root() / event.payload["audio"]).read_bytes() == note
        await typed(
            out,
            f"[{flavour}:{ALICE} from {ALICE}, voice note transcribed] deploy to staging\r".encode(),
        )
        [message] = (await stack.call("check_messages", agent_id=agent))["messages"]
        assert message["payload"]["transcribed"] is True
        assert message["payload"]["text"] == "deploy to staging"
        # Twilio posts the webhook again: one event, not fetched nor heard twice.
        assert (await hooks.post(flavour, form)).status_code == 200
        assert len(twilio.media_asked) == 2 and len(twilio.cdn_requests) == 1
        assert [e.id for e in await stack.store.events_after(agent, None, 10)] == [event.id]


async def test_a_twilio_voice_note_that_cannot_be_fetched_or_heard_is_answered_and_recorded(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio: FakeTwilio, agent: str, tmux: Tmux
) -> None:
    # The local recognizer cannot start (its grammar is missing): nothing can hear a note.
    voice = VoiceConfig(audio_dir=tmp_path / "audio", stt=STTConfig(grammar=tmp_path / "no.gram"))
    running, hooks = twilio_hearing(temporal_env, tmp_path, twilio, agent, voice)
    async with running as stack:
        out = await recording_pane(stack, agent, tmux, tmp_path)
        note = await voice_note("run the tests")

        gone = twilio.incoming(ALICE, "", whatsapp=True, media=[(note, "audio/ogg")])
        twilio.media.clear()  # deleted from the account before we asked
        down = twilio.incoming(ALICE, "", whatsapp=True, media=[(note, "audio/ogg")])
        unheard = twilio.incoming(ALICE, "", whatsapp=True, media=[(note, "audio/ogg")])
        answers = [await hooks.post("whatsapp", gone)]
        twilio.media_failures.extend([500, 500, 500])  # Twilio keeps failing
        answers.append(await hooks.post("whatsapp", down))
        answers.append(await hooks.post("whatsapp", unheard))

        reasons = [
            "Twilio would not hand it over (404)",
            "Twilio could not hand it over (Twilio answered 500)",
            "local:",
        ]
        for form, answer, reason in zip([gone, down, unheard], answers, reasons, strict=True):
            # Answered in the webhook's TwiML, with the reason.
            assert answer.status_code == 200
            assert f"Could not transcribe your voice note: {reason}" in answer.text, answer.text
            assert "Please send it as text." in answer.text
            assert twilio.auth_token not in answer.text
            event = await stack.store.get_event(
                provider_event_id("whatsapp", ALICE, form["MessageSid"])
            )
            assert event is not None and event.status == "rejected" and event.agent_id == agent
            assert (event.error or "").startswith(f"voice note not transcribed: {reason}")
            assert event.payload["text"] == "[voice note, not transcribed]"
        # Gone is asked once; a failing Twilio three times; the third note was fetched and kept.
        assert len(twilio.media_asked) == 1 + 3 + 1
        kept = await stack.store.get_event(
            provider_event_id("whatsapp", ALICE, unheard["MessageSid"])
        )
        assert kept is not None and (stack.cfg.voice.audio_root() / kept.payload["audio"]).is_file()
        # Nothing was typed for them: the next text is the pane's first line.
        await hooks.post("whatsapp", twilio.incoming(ALICE, "sent it as text", whatsapp=True))
        await typed(out, f"[whatsapp:{ALICE} from {ALICE}] sent it as text\r".encode())


async def test_a_photo_through_twilio_is_answered_and_not_typed_and_its_caption_is(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    twilio: FakeTwilio,
    agent: str,
    tmux: Tmux,
    grammar: Path,
) -> None:
    running, hooks = twilio_hearing(
        temporal_env, tmp_path, twilio, agent, offline(tmp_path, grammar)
    )
    async with running as stack:
        out = await recording_pane(stack, agent, tmux, tmp_path)

        photo = twilio.incoming(ALICE, "", whatsapp=True, media=[(PHOTO, "image/jpeg")])
        answer = await hooks.post("whatsapp", photo)

        assert answer.status_code == 200
        assert (
            "<Message>Only text and voice notes reach the agent: this image was not passed on. "
            "Please send it as text.</Message>"
        ) in answer.text
        assert (
            await stack.store.get_event(provider_event_id("whatsapp", ALICE, photo["MessageSid"]))
            is None
        )
        # With words, over MMS: the words reach the agent, which is told a photo came too.
        captioned = twilio.incoming(ALICE, "the error on screen", media=[(PHOTO, "image/png")])
        answer = await hooks.post("sms", captioned)
        assert answer.status_code == 200 and "<Message>" not in answer.text
        await typed(
            out, f"[sms:{ALICE} from {ALICE}] [image not passed on] the error on screen\r".encode()
        )
        assert twilio.media_asked == []  # a photo is never downloaded


async def test_a_strangers_voice_note_through_twilio_is_never_fetched(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    twilio: FakeTwilio,
    agent: str,
    grammar: Path,
    ship_it: bytes,
) -> None:
    running, hooks = twilio_hearing(
        temporal_env, tmp_path, twilio, agent, offline(tmp_path, grammar)
    )
    async with running as stack:
        form = twilio.incoming(STRANGER, "", whatsapp=True, media=[(ship_it, "audio/ogg")])
        answer = await hooks.post("whatsapp", form)

        assert answer.status_code == 200 and "agentcomms pair " in answer.text
        event = await stack.store.get_event(
            provider_event_id("whatsapp", STRANGER, form["MessageSid"])
        )
        assert event is not None and event.status == "rejected"
        assert twilio.media_asked == [] and twilio.cdn_requests == []
