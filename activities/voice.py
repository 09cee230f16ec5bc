"""A call's activities: speech in and out, the call's record, and what reaches the agent or the
human when the call cannot.

They act only for the deployment. Each runs only as a local activity of its own call's workflow
(``call-<id>``), which checks the deployment's tag on its input before anything else
(``check_call``) and on every line event before it counts (``check_line_event``): a call anyone
else starts, one started again with a copy of a genuine input (each input rings in one run, as
the projection records), or an activity anyone schedules on the shared queue, is refused. Those that ring,
text or reach a mailbox check the call's tag again and take what they do from it (the number
from the config, never from the request).

Providers fail in two ways: for good (no credentials, no tool installed:
``SpeechProviderUnavailable``, not retried, the workflow tries the next provider of its chain) or
for now (anything else: retried, then the next provider).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentcomms import errors
from agentcomms.config import Config
from agentcomms.errors import MailboxFull, RateLimited, SendRefused, SpeechProviderUnavailable
from agentcomms.ids import provider_event_id
from agentcomms.models import LOCAL_CHANNEL, Event, utcnow
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from agentcomms.voice.audio import AudioStore
from agentcomms.voice.models import (
    AudioRef,
    CallCheck,
    CallInput,
    CallNotice,
    CallUpdate,
    FallbackRequest,
    LineCheck,
    LineEvent,
    LiveCall,
    PlaceCall,
    Say,
    SpeechRequest,
    TranscribeRequest,
    Transcript,
    TurnCheck,
)
from agentcomms.voice.stt import stt_provider
from agentcomms.voice.tts import tts_provider
from agentcomms.workflow_ids import CALL_WORKFLOW, call_workflow_id

# How a call's outcome reaches an agent's mailbox (`workflows.mailbox.client.Mailbox.post` in a worker).
PostEvent = Callable[[Event], Awaitable[str]]
# How long after the gateway placed a call its workflow may start: a genuine input copied from
# an old history and started again later (a replay) rings nobody.
CALL_START_WINDOW = timedelta(minutes=10)


def phone_channel(call_id: str) -> str:
    return f"phone:{call_id}"


class VoiceActivities:
    def __init__(
        self, cfg: Config, store: Store, key: DeploymentKey, *, post: PostEvent | None = None
    ) -> None:
        self._cfg = cfg
        self._store = store
        self._key = key
        self._post = post
        self.audio = AudioStore(cfg.voice.audio_root())

    @activity.defn(name="check_call")
    async def check_call(self, req: CallCheck) -> CallInput:
        """The call's input, once the deployment's tag on it checks out (refused otherwise)."""
        call = _signed_call(self._key, req.call)
        placed = call.placed_at
        if placed is None or abs(req.started_at - placed) > CALL_START_WINDOW:
            activity.logger.warning(
                "refused call %s: placed at %s, started at %s (a copy started again?)",
                call.call_id,
                placed,
                req.started_at,
            )
            raise ApplicationError(
                f"call {call.call_id} was placed at {placed} but started at {req.started_at}: "
                "a call is started when it is placed, so this is a copy and rings nobody",
                type=errors.NOT_SIGNED,
                non_retryable=True,
            )
        # Within its window a copy could still be started again (the first run terminated, or
        # over): each call's input rings in one run only, whichever asks first.
        run = activity.info().workflow_run_id or ""
        first = await self._store.spend("call", call.call_id, run, utcnow())
        if first != run:
            activity.logger.warning(
                "refused call %s in run %s: its input was used by run %s", call.call_id, run, first
            )
            raise ApplicationError(
                f"call {call.call_id} was started already (run {first}): its input rings once, "
                "so this copy started again rings nobody",
                type=errors.NOT_SIGNED,
                non_retryable=True,
            )
        return call

    @activity.defn(name="check_line_event")
    async def check_line_event(self, req: LineCheck) -> LineEvent:
        """The line event, once the gateway's tag on it for this call checks out."""
        _in_the_call(req.call_id)
        if self._key.line_event_is_genuine(req.call_id, req.event):
            return req.event
        activity.logger.warning(
            "refused a %s line event of call %s: not signed by this deployment",
            req.event.kind,
            req.call_id,
        )
        raise ApplicationError(
            f"this {req.event.kind} line event is not signed by this deployment: it did not "
            "come from the gateway (the local phone or the call system's webhooks), so the "
            "call ignores it",
            type=errors.NOT_SIGNED,
            non_retryable=True,
        )

    @activity.defn(name="check_turn")
    async def check_turn(self, req: TurnCheck) -> bool:
        """True once the gateway's tag on the agent's turn for this call checks out (refused
        otherwise): only then is it said to the human."""
        _in_the_call(req.call_id)
        if self._key.turn_is_genuine(req.call_id, req.turn):
            return True
        what = "words" if isinstance(req.turn, Say) else "goodbye"
        activity.logger.warning(
            "refused %s for call %s: not signed by this deployment", what, req.call_id
        )
        raise ApplicationError(
            f"these {what} for call {req.call_id} are not signed by this deployment: they did "
            "not come from the agent through the gateway (or were for another call), so the "
            "call does not say them",
            type=errors.NOT_SIGNED,
            non_retryable=True,
        )

    @activity.defn(name="synthesize_speech")
    async def synthesize_speech(self, req: SpeechRequest) -> AudioRef:
        """Speak the text with one provider into the audio directory; its reference back."""
        _in_the_call(_call_of_audio(req.name))
        started = time.perf_counter()
        with _provider_errors(req.provider):
            data, ext = await tts_provider(req.provider, self._cfg).synthesize(req.text)
        took_ms = round((time.perf_counter() - started) * 1000, 2)
        ref = self.audio.write(f"{req.name}.{ext}", data, provider=req.provider)
        return ref.model_copy(update={"took_ms": took_ms})

    @activity.defn(name="transcribe_speech")
    async def transcribe_speech(self, req: TranscribeRequest) -> Transcript:
        """What the human said in a recording, by one provider."""
        _in_the_call(_call_of_audio(req.audio.name))
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
        _in_the_call(call.id)
        if update.turns:
            self.audio.append_turns(call.id, update.turns)
        call.transcript_ref = self.audio.transcript_ref(call.id)
        await self._store.upsert_call(call)

    @activity.defn(name="send_call_fallback")
    async def send_call_fallback(self, req: FallbackRequest) -> str:
        """The message of an unanswered call, left where the human will see it; says where:
        by SMS when Twilio SMS is set up and the human has a number, else the terminal inbox."""
        call = _signed_call(self._key, req.call)
        text = call.fallback_message.replace("{message}", call.message)
        number = self._cfg.voice.phone.to_number
        sms = self._cfg.chat.sms
        refused = None
        if number and sms.enabled and not sms.missing_credentials() and sms.from_number:
            from agentcomms.transports import send_pieces
            from agentcomms.transports.sms import sender

            try:
                await send_pieces(sender(self._cfg), number, text)
            except SendRefused as exc:  # for good: the inbox still has it
                refused = str(exc)
            else:
                return f"by SMS to {number}"
        await self._to_inbox(call, text)
        where = "to the terminal inbox (agentcomms inbox)"
        return f"{where}; the SMS was refused: {refused}" if refused else where

    async def _to_inbox(self, call: CallInput, text: str) -> None:
        now = activity.info().current_attempt_scheduled_time
        event = Event(
            id=provider_event_id("call", call.call_id, "fallback"),
            agent_id=call.agent_id,
            channel_id=LOCAL_CHANNEL,
            type="agent_message",
            role="agent",
            direction="out",
            source_agent_id=call.agent_id,
            payload={"text": text, "provider": "cli", "call_id": call.call_id},
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
        call = _signed_call(self._key, notice.call)
        if self._post is None:
            raise ApplicationError(
                "this worker cannot reach mailboxes", type=errors.MAILBOX_REFUSED
            )
        event = Event(
            id=provider_event_id("call", call.call_id, f"turn-{notice.turn}"),
            agent_id=call.agent_id,
            channel_id=phone_channel(call.call_id),
            type="human_message",
            role="human",
            payload={
                "text": notice.text(),
                "provider": "phone",
                "chat_id": call.call_id,
                "call_id": call.call_id,
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

    def __init__(self, cfg: Config, key: DeploymentKey) -> None:
        self._cfg = cfg
        self._key = key

    @activity.defn(name="place_twilio_call")
    async def place_twilio_call(self, req: PlaceCall) -> LiveCall:
        """Ring the human's number (the config's) for the signed call; the live call back."""
        from agentcomms.voice.callsystem.twilio import TwilioCalls

        call = _signed_call(self._key, req.call)
        with _call_system_errors():
            sid = await TwilioCalls(self._cfg).place(call)
        return LiveCall(call_id=call.call_id, sid=sid)

    @activity.defn(name="update_twilio_call")
    async def update_twilio_call(self, live: LiveCall) -> None:
        """Have the live call fetch the next turn's TwiML now."""
        from agentcomms.voice.callsystem.twilio import TwilioCalls

        _in_the_call(live.call_id)
        with _call_system_errors():
            await TwilioCalls(self._cfg).play_next(live)

    @activity.defn(name="end_twilio_call")
    async def end_twilio_call(self, live: LiveCall) -> None:
        """Hang up (or stop the ringing of) a call."""
        from agentcomms.voice.callsystem.twilio import TwilioCalls

        _in_the_call(live.call_id)
        with _call_system_errors():
            await TwilioCalls(self._cfg).hang_up(live, answered=live.answered)


def _in_the_call(call_id: str) -> None:
    """Refuse any caller but this call's own workflow, running the activity locally (a local
    activity runs in the worker that runs the workflow, so the workflow is agentcomms' own)."""
    info = activity.info()
    if (
        info.is_local
        and info.workflow_type == CALL_WORKFLOW
        and info.workflow_id == call_workflow_id(call_id)
    ):
        return
    activity.logger.warning(
        "refused %s for call %s, asked by %s (%s, %s): a call's activities run only inside "
        "its own workflow",
        info.activity_type,
        call_id,
        info.workflow_id,
        info.workflow_type,
        "local" if info.is_local else "scheduled on the task queue",
    )
    raise ApplicationError(
        f"{info.activity_type} runs only as a local activity of call {call_id}'s own workflow",
        type=errors.NOT_A_CALL,
        non_retryable=True,
    )


def _signed_call(key: DeploymentKey, call: CallInput) -> CallInput:
    """The call, asked by its own workflow and signed by the deployment; refused otherwise."""
    _in_the_call(call.call_id)
    if key.call_is_genuine(call):
        return call
    activity.logger.warning("refused call %s: not signed by this deployment", call.call_id)
    raise ApplicationError(
        f"call {call.call_id} is not signed by this deployment: it was not placed through "
        "agentcomms (or was altered since), so it rings nobody and reaches no one",
        type=errors.NOT_SIGNED,
        non_retryable=True,
    )


def _call_of_audio(name: str) -> str:
    return name.partition("/")[0]


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
