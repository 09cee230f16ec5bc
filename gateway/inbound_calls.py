"""Calling in through Twilio: the deployment's number's "A call comes in" webhook is
``server.public_url`` + ``/webhooks/twilio/voice``, and every step of the call is a webhook of its
own, each checked against Twilio's signature for our public URL (a forged one gets 403).

A caller id can be spoofed, so the caller must be in ``voice.inbound.allowed_callers`` and key or
say ``voice.inbound.pin``: anyone else is rejected before the call is answered (they hear
nothing, and pay nothing), a wrong PIN is hung up on, and both are recorded. What the caller then
hears and does is :mod:`gateway.phone_menu`'s; here each of its prompts becomes TwiML (a
``<Gather>`` of keys or words, a ``<Record>`` for a message, transcribed by the STT chain).

Twilio says when the call is over, whoever hung up, at the number's call status changes webhook
(its status callback), ``server.public_url`` + ``/webhooks/twilio/voice/status``: a caller who
hangs up mid-menu leaves no step behind, so only that ends the call's row and forgets its
progress. It may come twice, and alongside the step a hang-up still sends (a message recorded
until the caller hung up, ``Digits=hangup``): each call's requests are taken one at a time, in
whichever order Twilio sends them. That recording may come after the call's end (Twilio posts a
``<Record>``'s action even when the caller hung up, ignoring what it is answered): a call that
ends awaiting a message keeps its progress until the recording came (:mod:`gateway.phone_menu`),
so the message still reaches its agent.

The prompts are spoken by our TTS chain, as a call we place is: the audio goes into the call's
folder of the audio directory, beside its transcript (:mod:`gateway.phone_menu` keeps both), and
Twilio plays it from a short-lived signed URL; Twilio's own ``<Say>`` only when no provider of the
chain can speak.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import PurePosixPath
from xml.sax.saxutils import escape, quoteattr

import httpx
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from agentcomms.config import Config
from agentcomms.voice.callsystem.twilio import TWILIO_API, MediaSigner, call_end, signed_form
from agentcomms.voice.stt import stt_chain, stt_provider
from agentcomms.voice.tts import tts_chain, tts_provider
from gateway.phone_menu import OneAtATime, PhoneMenu, Prompt

log = logging.getLogger(__name__)

INBOUND_PATH = "/webhooks/twilio/voice"
STATUS_PATH = f"{INBOUND_PATH}/status"  # never a menu step: its route comes first
MESSAGE_MAX_S = 120
# Twilio waits 15 s for a webhook's answer: a provider slower than this gives way to the next.
SPEAK_WITHIN_S = 5


def _xml(*verbs: str) -> Response:
    body = '<?xml version="1.0" encoding="UTF-8"?><Response>' + "".join(verbs) + "</Response>"
    return Response(body, media_type="application/xml")


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

    def routes(self) -> list[BaseRoute]:
        return [
            Route(INBOUND_PATH, self._incoming, methods=["POST"]),
            Route(STATUS_PATH, self._status, methods=["POST"]),
            Route(f"{INBOUND_PATH}/{{step}}", self._step, methods=["POST"]),
        ]

    async def _incoming(self, request: Request) -> Response:
        form = await signed_form(request, self._phone, self._public_url)
        if form is None:
            return PlainTextResponse("forbidden: bad or missing X-Twilio-Signature", 403)
        number, sid = form.get("From", ""), form.get("CallSid", "")
        if number not in self._inbound.allowed_callers or self._inbound.pin is None:
            log.info("refused an inbound call from %s", number or "an unknown number")
            await self._menu.record_refusal(number, sid, "not in voice.inbound.allowed_callers")
            return _xml('<Reject reason="rejected"/>')
        async with self._one_at_a_time(sid):
            return self._twiml(await self._menu.start(sid, number, speak=self._speak))

    async def _step(self, request: Request) -> Response:
        form = await signed_form(request, self._phone, self._public_url)
        if form is None:
            return PlainTextResponse("forbidden: bad or missing X-Twilio-Signature", 403)
        step = request.path_params["step"]
        query = dict(request.query_params)
        call, audio, hung_up = form.get("CallSid", ""), None, False
        async with self._one_at_a_time(call):
            if step == "message":
                heard, audio = await self._transcribe(call, form.get("RecordingUrl", ""))
                # A recording ended by the caller hanging up: what we answer plays to nobody.
                hung_up = form.get("Digits") == "hangup"
            else:
                heard = form.get("Digits") or form.get("SpeechResult") or ""
            prompt = await self._menu.answer(
                call, step, heard, query=query, audio=audio, speak=self._speak, hung_up=hung_up
            )
        return self._twiml(prompt)

    async def _status(self, request: Request) -> Response:
        """The call is over, as Twilio says (completed, busy, no-answer, canceled, failed)."""
        form = await signed_form(request, self._phone, self._public_url)
        if form is None:
            return PlainTextResponse("forbidden: bad or missing X-Twilio-Signature", 403)
        call, end = form.get("CallSid", ""), call_end(form)
        if call and end is not None:
            async with self._one_at_a_time(call):
                # A message recorded until the hang-up may still be posted after this.
                ended = await self._menu.hung_up(
                    call, end.status, end.duration_s, recording_may_follow=True
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
            return _xml(words, "<Hangup/>")
        url = f"{self._public_url}{INBOUND_PATH}/{prompt.step}"
        if prompt.query:
            url += "?" + "&".join(f"{k}={v}" for k, v in prompt.query.items())
        action = quoteattr(url)
        if prompt.expect == "message":
            return _xml(
                words,
                f'<Record action={action} method="POST" maxLength="{MESSAGE_MAX_S}" '
                'finishOnKey="#" playBeep="true" trim="trim-silence"/>',
                "<Hangup/>",
            )
        digits, finish = (12, ' finishOnKey="#"') if prompt.expect == "pin" else (1, "")
        return _xml(
            f'<Gather input="dtmf speech" numDigits="{digits}" timeout="6"{finish} '
            f'action={action} method="POST">{words}</Gather>',
            "<Hangup/>",
        )

    async def _transcribe(self, call: str, url: str) -> tuple[str, str | None]:
        """The recording's words, by the STT chain (the first provider that hears them), and
        where its sound is kept (the console plays it)."""
        phone = self._phone
        if not url.startswith((phone.base_url or TWILIO_API).rstrip("/")):
            return "", None
        assert phone.account_sid is not None and phone.auth_token is not None
        async with httpx.AsyncClient(timeout=30) as client:
            got = await client.get(
                url + ".wav", auth=(phone.account_sid, phone.auth_token.get_secret_value())
            )
        if got.status_code != 200:
            return "", None
        kept = None
        if (name := await self._menu.recording_name(call)) is not None:
            with contextlib.suppress(ValueError, OSError):  # a call id no file may be named by
                kept = self._menu.audio.write(name, got.content).name
        for provider in stt_chain(self._cfg):
            try:
                text = await stt_provider(provider, self._cfg).transcribe(got.content, "audio/wav")
            except Exception as exc:  # the next provider of the chain
                log.warning("inbound message: %s did not hear it: %s", provider, exc)
                continue
            if text.strip():
                return text.strip(), kept
        return "", kept
