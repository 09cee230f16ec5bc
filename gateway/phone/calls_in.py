"""Calling in through Twilio: the deployment's number's "A call comes in" webhook is
``server.public_url`` + ``/webhooks/twilio/voice``, and every step of the call is a webhook of its
own, each checked against Twilio's signature for our public URL (a forged one gets 403).

A caller id can be spoofed, so the caller must be in ``voice.inbound.allowed_callers`` and key or
say ``voice.inbound.pin``: anyone else is rejected before the call is answered (they hear
nothing, and pay nothing), a wrong PIN is hung up on, and both are recorded. What the caller then
hears and does is :mod:`gateway.phone.menu`'s; here each of its prompts becomes TwiML (a
``<Gather>`` of keys or words, a ``<Record>`` for a message, transcribed by the STT chain).

Twilio says when the call is over, whoever hung up, at the number's call status changes webhook
(its status callback), ``server.public_url`` + ``/webhooks/twilio/voice/status``: a caller who
hangs up mid-menu leaves no step behind, so only that ends the call's row and forgets its
progress. It may come twice, and alongside the step a hang-up still sends (a message recorded
until the caller hung up, ``Digits=hangup``): each call's requests are taken one at a time, in
whichever order Twilio sends them. That recording may come after the call's end (Twilio posts a
``<Record>``'s action even when the caller hung up, ignoring what it is answered): a call that
ends awaiting a message whose recording began keeps its progress until the recording came
(:mod:`gateway.phone.menu`), so the message still reaches its agent. Twilio says a recording
began at the beep (the ``<Record>``'s recording status callback, ``in-progress``), and the
message is kept waiting from then on; a caller who hung up before the beep leaves nothing to
wait for, and the call's end forgets their progress at once.

Twilio may not serve a recording yet when it posts the ``<Record>``'s action (it 404s for a
moment): the caller is told the message was taken, and the message waits in the projection
(:mod:`agentcomms.store.phone_recordings`, by the recording's sid, with whom it is for) for the
``<Record>``'s recording status callback, ``/webhooks/twilio/voice/recording``, which says the
recording is ready (then it is posted) or absent (then the transcript and the log say the
message could not be fetched). Twilio may say a recording is complete and still 404 it for a
while, and says so once: the gateway then fetches it again itself (`FETCH_AGAIN_S`, the
recording's row saying so, so a restarted gateway carries on), and says it lost as above when it
gives up. Each recording is marked done once handled, and all these are taken one at a time with
the call's other requests, so its message is posted once whichever comes first.

The prompts are spoken by our TTS chain, as a call we place is: the audio goes into the call's
folder of the audio directory, beside its transcript (:mod:`gateway.phone.menu` keeps both), and
Twilio plays it from a short-lived signed URL; Twilio's own ``<Say>`` only when no provider of the
chain can speak.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta
from pathlib import PurePosixPath
from xml.sax.saxutils import escape, quoteattr

import httpx
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from agentcomms.config import Config
from agentcomms.models import utcnow
from agentcomms.store.phone_recordings import PhoneRecording
from agentcomms.transports._twilio import twiml
from agentcomms.voice.audio import turn_audio_name
from agentcomms.voice.callsystem.twilio import TWILIO_API, MediaSigner, call_end, signed_form
from agentcomms.voice.stt import stt_chain, stt_provider
from agentcomms.voice.tts import tts_chain, tts_provider
from gateway.phone.menu import Left, OneAtATime, PhoneMenu, Prompt

log = logging.getLogger(__name__)

INBOUND_PATH = "/webhooks/twilio/voice"
STATUS_PATH = f"{INBOUND_PATH}/status"  # never a menu step: its route comes first
RECORDING_PATH = f"{INBOUND_PATH}/recording"  # a <Record>'s recording status callback, likewise
# That a recording began (so a message may follow the call's end), and Twilio's final words on
# it; "completed" is the one that can be fetched.
RECORDING_EVENTS = "in-progress completed absent"
MESSAGE_MAX_S = 120
# A recording Twilio said is complete may still 404 for a moment, and Twilio says so once: it is
# fetched again this long after (about five minutes in all), then said lost.
FETCH_AGAIN_S = (10.0, 30.0, 60.0, 120.0, 300.0)
# Twilio waits 15 s for a webhook's answer: a provider slower than this gives way to the next.
SPEAK_WITHIN_S = 5


def _say(text: str) -> str:
    return f"<Say>{escape(text)}</Say>"


class InboundCalls:
    def __init__(self, cfg: Config, menu: PhoneMenu, signer: MediaSigner) -> None:
        self._cfg = cfg
        self._phone = cfg.voice.phone
        self._inbound = cfg.voice.inbound
        self._public_url = cfg.server.public_url or ""
        self._menu = menu
        self._signer = signer
        self._one_at_a_time = OneAtATime()  # a hang-up's status comes beside its last step
        self._fetching: set[asyncio.Task[None]] = set()  # recordings fetched again

    def routes(self) -> list[BaseRoute]:
        return [
            Route(INBOUND_PATH, self._incoming, methods=["POST"]),
            Route(STATUS_PATH, self._status, methods=["POST"]),
            Route(RECORDING_PATH, self._recording, methods=["POST"]),
            Route(f"{INBOUND_PATH}/{{step}}", self._step, methods=["POST"]),
        ]

    async def _signed(self, request: Request) -> dict[str, str] | Response:
        """The request's form when Twilio signed it for our public URL, else the refusal every
        route answers (before acting on anything the request says)."""
        form = await signed_form(request, self._phone, self._public_url)
        if form is None:
            return PlainTextResponse("forbidden: bad or missing X-Twilio-Signature", 403)
        return form

    async def _incoming(self, request: Request) -> Response:
        form = await self._signed(request)
        if isinstance(form, Response):
            return form
        number, sid = form.get("From", ""), form.get("CallSid", "")
        if number not in self._inbound.allowed_callers or self._inbound.pin is None:
            log.info("refused an inbound call from %s", number or "an unknown number")
            await self._menu.record_refusal(number, sid, "not in voice.inbound.allowed_callers")
            return twiml('<Reject reason="rejected"/>')
        async with self._one_at_a_time(sid):
            return self._twiml(await self._menu.start(sid, number, speak=self._speak))

    async def _step(self, request: Request) -> Response:
        form = await self._signed(request)
        if isinstance(form, Response):
            return form
        step = request.path_params["step"]
        query = dict(request.query_params)
        call, audio, hung_up, fetched = form.get("CallSid", ""), None, False, False
        left: Left = "heard"
        async with self._one_at_a_time(call):
            if step == "message":
                heard, audio, left = await self._left(call, form, query.get("agent", ""))
                fetched = left == "heard" and audio is not None
                # A recording ended by the caller hanging up: what we answer plays to nobody.
                hung_up = form.get("Digits") == "hangup"
            else:
                heard = form.get("Digits") or form.get("SpeechResult") or ""
            prompt = await self._menu.answer(
                call,
                step,
                heard,
                query=query,
                audio=audio,
                speak=self._speak,
                hung_up=hung_up,
                left=left,
            )
            if fetched and (sid := form.get("RecordingSid", "")):  # its callback posts nothing
                await self._menu.store.mark_done(sid, utcnow())
        return self._twiml(prompt)

    async def _left(
        self, call: str, form: dict[str, str], agent: str
    ) -> tuple[str, str | None, Left]:
        """A message's recording, at the <Record>'s action: its words and where its sound is
        kept, when Twilio serves it already; else it waits (kept in the projection, with whom it
        is for) for the recording status callback, and the caller is told it was taken."""
        sid, url = form.get("RecordingSid", ""), form.get("RecordingUrl", "")
        store = self._menu.store
        kept = await store.recording(sid) if sid else None
        if kept is not None and kept.done:  # its recording status callback came first
            return "", None, "heard" if kept.lost else "sent"
        if kept is not None and kept.fetching_since is not None:  # the gateway fetches it again
            return "", None, "awaited"
        caller = await store.caller(call)
        if caller is None and sid:  # its call's end forgot it: Twilio never said it began
            log.warning("inbound call %s: recording %s came for a call over; not posted", call, sid)
        if caller is None or not self._ours(url):
            return "", None, "heard"
        data = await self._fetch(url)
        if data is not None:
            heard, audio = await self._hear(call, caller.turn, data)
            return heard, audio, "heard"
        if not sid:  # nothing to wait for: Twilio always names its recordings
            return "", None, "heard"
        left = PhoneRecording(call, caller.number, agent, url, caller.turn)
        await store.keep_recording(sid, left, utcnow())
        log.info("inbound call %s: recording %s not ready yet; the message waits for it", call, sid)
        return "", None, "awaited"

    async def _recording(self, request: Request) -> Response:
        """Twilio's recording status callback for a message's <Record>: the recording is ready
        (completed) or will never be (absent). A message still waiting for it is posted now, or
        said lost in the call's transcript and the log; one posted already is left alone."""
        form = await self._signed(request)
        if isinstance(form, Response):
            return form
        call, sid = form.get("CallSid", ""), form.get("RecordingSid", "")
        status, url = form.get("RecordingStatus", ""), form.get("RecordingUrl", "")
        if not (call and sid) or status == "processing":
            return Response(status_code=204)
        if status == "in-progress":
            await self._began(call, sid, url, request.query_params.get("agent", ""))
            return Response(status_code=204)
        async with self._one_at_a_time(call):
            left = await self._menu.store.recording(sid)
            if left is None:  # came before the <Record>'s action: the caller still awaits it
                caller = await self._menu.store.caller(call)
                if caller is None or caller.awaits != "message":
                    return Response(status_code=204)  # not a message of ours
                agent = request.query_params.get("agent", "")
                left = PhoneRecording(call, caller.number, agent, url, caller.turn)
            if left.done:
                return Response(status_code=204)
            left.url = left.url or url
            if status != "completed":
                await self._lost(sid, left, f"the recording is {status or 'unknown'}")
            elif not self._ours(left.url):
                await self._lost(sid, left, "the recording is not our Twilio account's")
            elif (data := await self._fetch(left.url)) is not None:
                await self._post_later(sid, left, data)
            elif left.fetching_since is None:
                # Twilio says this once: the gateway fetches it again itself, a restart included.
                log.warning("inbound call %s: recording %s completed but not served", call, sid)
                await self._menu.store.keep_recording(sid, left, utcnow(), fetching=True)
                self._fetch_later(sid)
        return Response(status_code=204)

    async def _began(self, call: str, sid: str, url: str, agent: str) -> None:
        """The caller is recording a message (past the beep): it is kept waiting, with whom it
        is for, so the call's end keeps the call's progress for it; a caller who hangs up
        before the beep leaves nothing to wait for."""
        async with self._one_at_a_time(call):
            store = self._menu.store
            caller = await store.caller(call)
            if caller is None or caller.awaits != "message" or await store.recording(sid):
                return
            left = PhoneRecording(call, caller.number, agent, url, caller.turn)
            await store.keep_recording(sid, left, utcnow())

    async def _post_later(self, sid: str, left: PhoneRecording, data: bytes) -> None:
        """The message of a recording the caller was told was taken: posted now, and done."""
        heard, audio = await self._hear(left.call, left.turn, data)
        if not heard:
            log.warning("inbound call %s: the message for %s had no words", left.call, left.agent)
        await self._menu.message_later(left.call, left.number, left.agent, left.turn, heard, audio)
        await self._menu.store.mark_done(sid, utcnow())

    async def _lost(self, sid: str, left: PhoneRecording, why: str) -> None:
        """A message the caller was told was taken, never to be fetched: the call's transcript
        and the log say so, and it is done."""
        log.error(
            "inbound call %s: the message for %s could not be fetched: recording %s: %s",
            left.call,
            left.agent,
            sid,
            why,
        )
        self._menu.message_lost(left.call, left.agent, left.turn, why)
        await self._menu.store.mark_done(sid, utcnow(), lost=True)

    async def resume(self) -> None:
        """Fetch again the recordings a gateway before this one was still fetching."""
        for sid in await self._menu.store.recordings_fetching():
            self._fetch_later(sid)

    async def close(self) -> None:
        for task in self._fetching:
            task.cancel()
        await asyncio.gather(*self._fetching, return_exceptions=True)

    def _fetch_later(self, sid: str) -> None:
        task = asyncio.create_task(self._fetch_again(sid), name=f"fetching recording {sid}")
        self._fetching.add(task)
        task.add_done_callback(self._fetching.discard)

    async def _fetch_again(self, sid: str) -> None:
        """A recording Twilio said is complete but did not serve, fetched again `FETCH_AGAIN_S`
        after it said so, then said lost; unless a request about it came meanwhile (the
        <Record>'s action may still bring it) and it is done."""
        for attempt, after_s in enumerate(FETCH_AGAIN_S, start=1):
            store = self._menu.store
            try:
                left = await store.recording(sid)
                if left is None or left.fetching_since is None:
                    return  # posted, or said lost, by a request about it
                since, last = left.fetching_since, attempt == len(FETCH_AGAIN_S)
                if not last and since + timedelta(seconds=FETCH_AGAIN_S[attempt]) < utcnow():
                    continue  # its time passed while no gateway ran: only the latest is tried
                due = since + timedelta(seconds=after_s)
                await asyncio.sleep(max(0.0, (due - utcnow()).total_seconds()))
                async with self._one_at_a_time(left.call):
                    left = await store.recording(sid)
                    if left is None or left.fetching_since is None:
                        return
                    if (data := await self._fetch(left.url)) is not None:
                        await self._post_later(sid, left, data)
                        return
                    if last:
                        tried = f"{attempt + 1} tries in {after_s:g} s"
                        await self._lost(sid, left, f"Twilio never served it ({tried})")
            except Exception:  # the next try, or the next gateway, carries on
                log.exception("inbound message: fetching recording %s again failed", sid)

    async def _status(self, request: Request) -> Response:
        """The call is over, as Twilio says (completed, busy, no-answer, canceled, failed)."""
        form = await self._signed(request)
        if isinstance(form, Response):
            return form
        call, end = form.get("CallSid", ""), call_end(form)
        if call and end is not None:
            async with self._one_at_a_time(call):
                # A message recorded until the hang-up may still be posted after this; none
                # comes of a caller who hung up before the beep.
                caller = await self._menu.store.caller(call)
                began = caller is not None and await self._menu.store.recording_began(
                    call, caller.turn
                )
                ended = await self._menu.hung_up(
                    call, end.status, end.duration_s, recording_may_follow=began
                )
                if ended:
                    log.info("inbound call %s ended: %s", call, end.status)
        return Response(status_code=204)

    async def _speak(self, words: str, name: str) -> str | None:
        """The words said by our TTS chain, kept under `name` in the audio directory (its
        extension the provider's); None when no provider of the chain can say them in time."""
        for provider in tts_chain(self._cfg):
            try:
                async with asyncio.timeout(SPEAK_WITHIN_S):
                    data, ext = await tts_provider(provider, self._cfg).synthesize(words)
            except Exception as exc:  # the next provider of the chain
                log.warning("inbound call: %s could not speak: %s", provider, exc)
                continue
            kept = str(PurePosixPath(name).with_suffix(f".{ext}"))
            return self._menu.audio.write(kept, data, provider=provider).name
        return None

    def _twiml(self, prompt: Prompt) -> Response:
        if prompt.audio is None:
            words = _say(prompt.words)
        else:
            words = f"<Play>{escape(self._signer.url(self._public_url, prompt.audio))}</Play>"
        if prompt.expect == "end":
            return twiml(words, "<Hangup/>")
        url = f"{self._public_url}{INBOUND_PATH}/{prompt.step}"
        query = "&".join(f"{k}={v}" for k, v in prompt.query.items())
        query = f"?{query}" if query else ""
        action = quoteattr(url + query)
        if prompt.expect == "message":
            # The recording may not be served yet when Twilio posts the action: its status
            # callback (which names whom the message is for too) says when it is.
            ready = quoteattr(f"{self._public_url}{RECORDING_PATH}{query}")
            return twiml(
                words,
                f'<Record action={action} method="POST" maxLength="{MESSAGE_MAX_S}" '
                'finishOnKey="#" playBeep="true" trim="trim-silence" '
                f'recordingStatusCallback={ready} recordingStatusCallbackMethod="POST" '
                f'recordingStatusCallbackEvent="{RECORDING_EVENTS}"/>',
                "<Hangup/>",
            )
        digits, finish = (12, ' finishOnKey="#"') if prompt.expect == "pin" else (1, "")
        return twiml(
            f'<Gather input="dtmf speech" numDigits="{digits}" timeout="6"{finish} '
            f'action={action} method="POST">{words}</Gather>',
            "<Hangup/>",
        )

    def _ours(self, url: str) -> bool:
        """A recording of our Twilio account's (we send it our credentials)."""
        return url.startswith((self._phone.base_url or TWILIO_API).rstrip("/") + "/")

    async def _fetch(self, url: str) -> bytes | None:
        """The recording's sound; None while Twilio does not serve it (404 until it is ready,
        or a transient failure)."""
        phone = self._phone
        assert phone.account_sid is not None and phone.auth_token is not None
        auth = (phone.account_sid, phone.auth_token.get_secret_value())
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                got = await client.get(url + ".wav", auth=auth)
        except httpx.HTTPError as exc:
            log.warning("inbound message: recording %s not fetched: %s", url, exc)
            return None
        if got.status_code != 200:
            log.info("inbound message: recording %s: HTTP %s", url, got.status_code)
            return None
        return got.content

    async def _hear(self, call: str, turn: int, data: bytes) -> tuple[str, str | None]:
        """The recording's words, by the STT chain (the first provider that hears them), and
        where its sound is kept (the console plays it), beside the prompt `turn` it answered."""
        kept = None
        with contextlib.suppress(ValueError, OSError):  # a call id no file may be named by
            kept = self._menu.audio.write(turn_audio_name(call, turn, "human"), data).name
        for provider in stt_chain(self._cfg):
            try:
                text = await stt_provider(provider, self._cfg).transcribe(data, "audio/wav")
            except Exception as exc:  # the next provider of the chain
                log.warning("inbound message: %s did not hear it: %s", provider, exc)
                continue
            if text.strip():
                return text.strip(), kept
        return "", kept
