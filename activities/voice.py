"""A call's activities: speech in and out, the call's record, and what reaches the agent or the
human when the call cannot.

Providers fail in two ways: for good (no credentials, no tool installed:
``SpeechProviderUnavailable``, not retried, the workflow tries the next provider of its chain) or
for now (anything else: retried, then the next provider).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentcomms import errors
from agentcomms.config import Config
from agentcomms.errors import MailboxFull, RateLimited, SendRefused, SpeechProviderUnavailable
from agentcomms.ids import provider_event_id
from agentcomms.models import LOCAL_CHANNEL, Event
from agentcomms.store import Store
from agentcomms.voice.audio import AudioStore
from agentcomms.voice.models import (
    AudioRef,
    CallNotice,
    CallUpdate,
    FallbackRequest,
    LiveCall,
    PlaceCall,
    SpeechRequest,
    TranscribeRequest,
    Transcript,
)
from agentcomms.voice.stt import stt_provider
from agentcomms.voice.tts import tts_provider

# How a call's outcome reaches an agent's mailbox (`workflows.mailbox.client.Mailbox.post` in a worker).
PostEvent = Callable[[Event], Awaitable[str]]


def phone_channel(call_id: str) -> str:
    return f"phone:{call_id}"


class VoiceActivities:
    def __init__(self, cfg: Config, store: Store, *, post: PostEvent | None = None) -> None:
        self._cfg = cfg
        self._store = store
        self._post = post
        self.audio = AudioStore(cfg.voice.audio_root())

    @activity.defn(name="synthesize_speech")
    async def synthesize_speech(self, req: SpeechRequest) -> AudioRef:
        """Speak the text with one provider into the audio directory; its reference back."""
        started = time.perf_counter()
        with _provider_errors(req.provider):
            data, ext = await tts_provider(req.provider, self._cfg).synthesize(req.text)
        took_ms = round((time.perf_counter() - started) * 1000, 2)
        ref = self.audio.write(f"{req.name}.{ext}", data, provider=req.provider)
        return ref.model_copy(update={"took_ms": took_ms})

    @activity.defn(name="transcribe_speech")
    async def transcribe_speech(self, req: TranscribeRequest) -> Transcript:
        """What the human said in a recording, by one provider."""
        try:
            data = self.audio.read(req.audio.name)
        except (OSError, ValueError) as exc:
            raise ApplicationError(
                f"the recording {req.audio.name} cannot be read: {exc}",
                type=errors.AUDIO_MISSING,
                non_retryable=True,
            ) from exc
        started = time.perf_counter()
        with _provider_errors(req.provider):
            text = await stt_provider(req.provider, self._cfg).transcribe(
                data, req.audio.content_type
            )
        took_ms = round((time.perf_counter() - started) * 1000, 2)
        activity.logger.info("heard %r in %s (%s)", text, req.audio.name, req.provider)
        return Transcript(text=text, provider=req.provider, took_ms=took_ms)

    @activity.defn(name="record_call")
    async def record_call(self, update: CallUpdate) -> None:
        """Write the call's row, and append its new turns to the call's transcript file.

        Idempotent: a retry (the worker died after writing, before reporting it) appends
        nothing twice, each (turn, speaker) is written once.
        """
        call = update.call
        if update.turns:
            path = self.audio.root / call.id / "transcript.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            written = _transcript_keys(path)
            with path.open("a", encoding="utf-8") as out:
                if out.tell() and not path.read_bytes().endswith(b"\n"):
                    out.write("\n")  # after a line a crash cut short
                for turn in update.turns:
                    if (turn.turn, turn.speaker) in written:
                        continue
                    out.write(json.dumps(turn.model_dump(mode="json"), ensure_ascii=False) + "\n")
        call.transcript_ref = f"{call.id}/transcript.jsonl"
        await self._store.upsert_call(call)

    @activity.defn(name="send_call_fallback")
    async def send_call_fallback(self, req: FallbackRequest) -> str:
        """The message of an unanswered call, left where the human will see it; says where:
        by SMS when Twilio SMS is set up and the human has a number, else the terminal inbox."""
        number = req.to_number or self._cfg.voice.phone.to_number
        sms = self._cfg.chat.sms
        refused = None
        if number and sms.enabled and not sms.missing_credentials() and sms.from_number:
            from agentcomms.transports import send_pieces
            from agentcomms.transports.sms import sender

            try:
                await send_pieces(sender(self._cfg), number, req.text)
            except SendRefused as exc:  # for good: the inbox still has it
                refused = str(exc)
            else:
                return f"by SMS to {number}"
        await self._to_inbox(req)
        where = "to the terminal inbox (agentcomms inbox)"
        return f"{where}; the SMS was refused: {refused}" if refused else where

    async def _to_inbox(self, req: FallbackRequest) -> None:
        now = activity.info().current_attempt_scheduled_time
        event = Event(
            id=provider_event_id("call", req.call_id, "fallback"),
            agent_id=req.agent_id,
            channel_id=LOCAL_CHANNEL,
            type="agent_message",
            role="agent",
            direction="out",
            source_agent_id=req.agent_id,
            payload={"text": req.text, "provider": "cli", "call_id": req.call_id},
            status="delivered",
            attempts=1,
            created_at=now,
            delivered_at=now,
        )
        await self._store.record_event(event)

    @activity.defn(name="post_call_answer")
    async def post_call_answer(self, notice: CallNotice) -> str:
        """Put a call's outcome in the agent's mailbox: typed into its pane, kept for
        check_messages. The same turn posted twice is one message."""
        if self._post is None:
            raise ApplicationError(
                "this worker cannot reach mailboxes", type=errors.MAILBOX_REFUSED
            )
        event = Event(
            id=provider_event_id("call", notice.call_id, f"turn-{notice.turn}"),
            agent_id=notice.agent_id,
            channel_id=phone_channel(notice.call_id),
            type="human_message",
            role="human",
            payload={
                "text": notice.text,
                "provider": "phone",
                "chat_id": notice.call_id,
                "call_id": notice.call_id,
                "response": notice.response,
                "timed_out": notice.timed_out,
                "status": notice.status,
                "sender_name": "phone",
            },
        )
        try:
            return await self._post(event)
        except MailboxFull as exc:
            raise ApplicationError(str(exc), type=errors.MAILBOX_REFUSED) from exc


class TwilioCallActivities:
    """Placing, steering and hanging up calls through Twilio's REST API."""

    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg

    @activity.defn(name="place_twilio_call")
    async def place_twilio_call(self, req: PlaceCall) -> LiveCall:
        from agentcomms.voice.callsystem.twilio import TwilioCalls

        with _call_system_errors():
            sid = await TwilioCalls(self._cfg).place(req)
        return LiveCall(call_id=req.call_id, sid=sid)

    @activity.defn(name="update_twilio_call")
    async def update_twilio_call(self, live: LiveCall) -> None:
        """Have the live call fetch the next turn's TwiML now."""
        from agentcomms.voice.callsystem.twilio import TwilioCalls

        with _call_system_errors():
            await TwilioCalls(self._cfg).play_next(live)

    @activity.defn(name="end_twilio_call")
    async def end_twilio_call(self, live: LiveCall) -> None:
        """Hang up (or stop the ringing of) a call."""
        from agentcomms.voice.callsystem.twilio import TwilioCalls

        with _call_system_errors():
            await TwilioCalls(self._cfg).hang_up(live, answered=live.answered)


def _transcript_keys(path: Path) -> set[tuple[int, str]]:
    """The (turn, speaker) of every complete line of a transcript file."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return set()
    keys = set()
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:  # a line cut short by a crash mid-write
            continue
        keys.add((entry.get("turn"), entry.get("speaker")))
    return keys


@contextmanager
def _call_system_errors() -> Iterator[None]:
    try:
        yield
    except SendRefused as exc:
        raise ApplicationError(str(exc), type=errors.CALL_REFUSED, non_retryable=True) from exc
    except RateLimited as exc:
        raise ApplicationError(str(exc), type=errors.CALL_SYSTEM_UNAVAILABLE) from exc
    except Exception as exc:  # network, 5xx: retried
        raise ApplicationError(
            f"{type(exc).__name__}: {exc}", type=errors.CALL_SYSTEM_UNAVAILABLE
        ) from exc


@contextmanager
def _provider_errors(provider: str) -> Iterator[None]:
    try:
        yield
    except SpeechProviderUnavailable as exc:
        raise ApplicationError(
            f"{provider}: {exc}", type=errors.SPEECH_PROVIDER_UNAVAILABLE, non_retryable=True
        ) from exc
    except ApplicationError:
        raise
    except Exception as exc:
        raise ApplicationError(
            f"{provider}: {type(exc).__name__}: {exc}", type=errors.SPEECH_FAILED
        ) from exc
