"""Phone calls through Twilio Programmable Voice (the `twilio` SDK), webhooks on the gateway.

Placing and steering a call is REST, run as activities (:class:`TwilioCalls`): create the call
with a status callback, point the live call at new TwiML when the next turn is ready, hang up.
What Twilio asks and reports comes to the gateway's HTTP listener (:class:`TwilioVoiceReceiver`),
under ``server.public_url``, every request's ``X-Twilio-Signature`` checked against that URL:

- ``…/answer``: the human picked up (or an answering machine did: the message is left as a
  voicemail); the TwiML plays the first words and records the answer;
- ``…/twiml``: what to do now: play a turn and record, or hold the line while the agent thinks
  (a pause, then ask again; the workflow's update of the live call cuts the pause short);
- ``…/recording?turn=N``: the human's answer, downloaded into the audio directory;
- ``…/played?turn=N``: words said without listening were played;
- ``…/status``: ringing, no-answer, busy, failed, completed (hung up); :func:`call_end` reads
  the end, for a call coming in too.

Our audio reaches Twilio at ``/voice/media/<call>/<file>`` under short-lived signed URLs.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, cast
from urllib.parse import urlencode
from xml.sax.saxutils import escape, quoteattr

import httpx
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from twilio.request_validator import RequestValidator
from twilio.rest import Client

from agentcomms.config import Config, PhoneConfig
from agentcomms.errors import SendRefused
from agentcomms.models import CallStatus
from agentcomms.transports._twilio import SIGNATURE_HEADER, HttpxTwilioClient, twilio_errors, twiml
from agentcomms.voice.audio import AudioStore, turn_audio_name
from agentcomms.voice.models import (
    CallInput,
    Line,
    LineEvent,
    LineEventKind,
    LiveCall,
    check_audio_name,
)

log = logging.getLogger(__name__)

VOICE_PATH = "/voice/twilio"
MEDIA_PATH = "/voice/media"
TWILIO_API = "https://api.twilio.com"
HOLD_S = 60  # a held line asks for TwiML again after this long
MEDIA_TTL_S = 600
ANSWER_READY_S = 10.0  # how long the answer webhook waits for the first turn's words
KEY_WAIT_S = 3  # how long a call about a request waits for a key after its words
MACHINE = ("machine_start", "machine_end_beep", "machine_end_silence", "machine_end_other", "fax")
STATUS_EVENTS: dict[str, LineEventKind] = {
    "busy": "busy",
    "no-answer": "no-answer",
    "failed": "failed",
    "canceled": "no-answer",
    "completed": "hangup",
}


@dataclass(frozen=True)
class CallEnd:
    """How Twilio says a call ended, in a status callback (a call we place, or one coming in)."""

    status: CallStatus  # Twilio's own word, one of ours: completed, busy, no-answer…
    duration_s: float | None  # CallDuration: how long it was connected, when Twilio says


def call_end(form: Mapping[str, str]) -> CallEnd | None:
    """The end a status callback reports; None for a step on the way (initiated, ringing…)."""
    status = form.get("CallStatus", "")
    if status not in STATUS_EVENTS:
        return None
    try:
        duration: float | None = float(form.get("CallDuration", ""))
    except ValueError:
        duration = None
    return CallEnd(cast(CallStatus, status), duration)


def call_url(public_url: str, call_id: str, what: str, **query: object) -> str:
    url = f"{public_url}{VOICE_PATH}/{call_id}/{what}"
    return f"{url}?{urlencode(query)}" if query else url


class TwilioCalls:
    """The REST side: place a call, point it at new TwiML, hang it up."""

    def __init__(self, cfg: Config) -> None:
        self._phone = cfg.voice.phone
        self._public_url = cfg.server.public_url or ""

    def _client(self) -> Client:
        phone = self._phone
        assert phone.account_sid is not None and phone.auth_token is not None
        client = Client(
            phone.account_sid, phone.auth_token.get_secret_value(), http_client=HttpxTwilioClient()
        )
        if phone.base_url:
            client.api.base_url = phone.base_url.rstrip("/")
        return client

    async def place(self, req: CallInput) -> str:
        """Ring the human's number, the config's (whatever the request names)."""
        number = self._phone.to_number
        if not number:
            raise SendRefused("voice.phone.to_number is not set: set the human's number to call")
        with twilio_errors("voice", number):
            call = await self._client().calls.create_async(
                to=number,
                from_=self._phone.from_number,
                url=call_url(self._public_url, req.call_id, "answer"),
                method="POST",
                status_callback=call_url(self._public_url, req.call_id, "status"),
                status_callback_method="POST",
                status_callback_event=["initiated", "ringing", "answered", "completed"],
                timeout=max(5, int(req.ring_timeout_s)),
                machine_detection="Enable",
            )
        return str(call.sid)

    async def play_next(self, live: LiveCall) -> None:
        """Have the live call fetch its TwiML now (ending the hold it is in)."""
        with twilio_errors("voice", live.sid):
            await (
                self._client()
                .calls(live.sid)
                .update_async(url=call_url(self._public_url, live.call_id, "twiml"), method="POST")
            )

    async def hang_up(self, live: LiveCall, *, answered: bool) -> None:
        with twilio_errors("voice", live.sid):
            await (
                self._client()
                .calls(live.sid)
                .update_async(status="completed" if answered else "canceled")
            )


class MediaSigner:
    """Short-lived signed URLs for our audio: Twilio fetches them; nobody else can."""

    def __init__(self, key: bytes | None = None, *, ttl_s: float = MEDIA_TTL_S) -> None:
        self._key = key or secrets.token_bytes(32)
        self.ttl_s = ttl_s

    def _sign(self, name: str, expires: int) -> str:
        message = f"{name}\n{expires}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def url(self, public_url: str, name: str, *, now: float | None = None) -> str:
        expires = int((now or time.time()) + self.ttl_s)
        query = urlencode({"exp": expires, "sig": self._sign(name, expires)})
        return f"{public_url}{MEDIA_PATH}/{name}?{query}"

    def check(self, name: str, expires: str, signature: str, *, now: float | None = None) -> bool:
        try:
            when = int(expires)
        except ValueError:
            return False
        if when < (now or time.time()):
            return False
        return hmac.compare_digest(self._sign(name, when), signature)


async def signed_form(
    request: Request, phone: PhoneConfig, public_url: str
) -> dict[str, str] | None:
    """The request's form when Twilio signed it for our public URL (and our account)."""
    token = phone.auth_token
    signature = request.headers.get(SIGNATURE_HEADER)
    if token is None or signature is None or not public_url:
        return None  # before the body is read: an unsigned caller costs nothing
    form = {k: str(v) for k, v in (await request.form()).items()}
    url = public_url + request.url.path
    if request.url.query:
        url += "?" + request.url.query
    if not RequestValidator(token.get_secret_value()).validate(url, form, signature):
        return None
    if form.get("AccountSid") != phone.account_sid:
        return None
    return form


class CallLines(Protocol):
    """What the webhooks need of the gateway: report line events, read a call's line."""

    async def line_event(self, call_id: str, event: LineEvent) -> bool:
        """Hand the event to the call (durably); False when the call is over."""
        ...

    async def current_line(self, call_id: str, *, ready_within_s: float = 0) -> Line | None:
        """The call's line; with `ready_within_s`, once a turn waits on the phone (or then)."""
        ...


class TwilioVoiceReceiver:
    def __init__(self, cfg: Config, lines: CallLines, *, signer: MediaSigner | None = None) -> None:
        self._phone = cfg.voice.phone
        self._public_url = cfg.server.public_url or ""
        self._lines = lines
        self._audio = AudioStore(cfg.voice.audio_root())
        self._signer = signer or MediaSigner()
        self._record_max_s = int(min(max(cfg.voice.transcript_timeout_s, 5), 14_400))
        self._silence_s = max(1, round(cfg.voice.stt.silence_ms / 1000))
        # Turns whose words this gateway has handed Twilio: a hold's own re-fetch and the
        # workflow's update of the live call must not play them twice.
        self._served: dict[str, set[int]] = {}

    def routes(self) -> list[BaseRoute]:
        return [
            Route(f"{VOICE_PATH}/{{call_id}}/answer", self._answer, methods=["POST"]),
            Route(f"{VOICE_PATH}/{{call_id}}/twiml", self._twiml, methods=["POST"]),
            Route(f"{VOICE_PATH}/{{call_id}}/recording", self._recording, methods=["POST"]),
            Route(f"{VOICE_PATH}/{{call_id}}/digits", self._digits, methods=["POST"]),
            Route(f"{VOICE_PATH}/{{call_id}}/played", self._played, methods=["POST"]),
            Route(f"{VOICE_PATH}/{{call_id}}/status", self._status, methods=["POST"]),
            Route(f"{MEDIA_PATH}/{{call_id}}/{{file}}", self._media, methods=["GET"]),
        ]

    # ---- checks ---------------------------------------------------------------------------------

    async def _form(self, request: Request) -> dict[str, str] | None:
        return await signed_form(request, self._phone, self._public_url)

    @staticmethod
    def _forbidden() -> Response:
        return PlainTextResponse("forbidden: bad or missing X-Twilio-Signature", 403)

    # ---- TwiML ----------------------------------------------------------------------------------

    def _words(self, line: Line) -> str:
        if line.audio is not None:
            return f"<Play>{escape(self._signer.url(self._public_url, line.audio.name))}</Play>"
        return f"<Say>{escape(line.say or '')}</Say>"

    def _for_line(self, call_id: str, line: Line | None) -> Response:
        if line is None or line.state == "ended":
            return twiml("<Hangup/>")
        served = self._served.setdefault(call_id, set())
        if line.state == "connected" and line.expect and line.turn not in served:
            served.add(line.turn)
            if line.expect == "answer":
                record = call_url(self._public_url, call_id, "recording", turn=line.turn)
                words = self._words(line)
                if line.approval_id is not None:
                    # A key pressed while (or just after) the words play is the answer; with
                    # none, the spoken answer is recorded as in any turn.
                    digits = call_url(self._public_url, call_id, "digits", turn=line.turn)
                    # Several keys (a question's choices) end with the pound key.
                    keys = 'finishOnKey="#"' if line.several_keys else 'numDigits="1"'
                    words = (
                        f'<Gather input="dtmf" {keys} timeout="{KEY_WAIT_S}" '
                        f'action={quoteattr(digits)} method="POST">{words}</Gather>'
                    )
                return twiml(
                    words,
                    f'<Record action={quoteattr(record)} method="POST" '
                    f'maxLength="{self._record_max_s}" timeout="{self._silence_s}" '
                    'playBeep="false" trim="trim-silence"/>',
                    self._hold(call_id),
                )
            played = call_url(self._public_url, call_id, "played", turn=line.turn)
            return twiml(self._words(line), f'<Redirect method="POST">{escape(played)}</Redirect>')
        return twiml(self._hold(call_id))

    def _hold(self, call_id: str) -> str:
        again = call_url(self._public_url, call_id, "twiml")
        return f'<Pause length="{HOLD_S}"/><Redirect method="POST">{escape(again)}</Redirect>'

    # ---- webhooks -------------------------------------------------------------------------------

    async def _answer(self, request: Request) -> Response:
        call_id = request.path_params["call_id"]
        form = await self._form(request)
        if form is None:
            return self._forbidden()
        answered_by = form.get("AnsweredBy", "human")
        if answered_by in MACHINE:
            # A voicemail: leave the first words, then hang up; the call sends the SMS too.
            line = await self._lines.current_line(call_id)
            await self._lines.line_event(call_id, LineEvent(kind="machine", detail=answered_by))
            return twiml(self._words(line), "<Hangup/>") if line else twiml("<Hangup/>")
        if not await self._lines.line_event(call_id, LineEvent(kind="answered", phone_id="twilio")):
            return twiml("<Hangup/>")
        line = await self._lines.current_line(call_id, ready_within_s=ANSWER_READY_S)
        return self._for_line(call_id, line)

    async def _twiml(self, request: Request) -> Response:
        call_id = request.path_params["call_id"]
        if await self._form(request) is None:
            return self._forbidden()
        return self._for_line(call_id, await self._lines.current_line(call_id))

    async def _recording(self, request: Request) -> Response:
        call_id = request.path_params["call_id"]
        form = await self._form(request)
        if form is None:
            return self._forbidden()
        turn = int(request.query_params.get("turn", "0"))
        url = form.get("RecordingUrl", "")
        if turn <= 0 or not url.startswith((self._phone.base_url or TWILIO_API).rstrip("/")):
            return PlainTextResponse("not a recording of this account", 400)
        phone = self._phone
        assert phone.account_sid is not None and phone.auth_token is not None
        async with httpx.AsyncClient(timeout=30) as client:
            got = await client.get(
                url + ".wav", auth=(phone.account_sid, phone.auth_token.get_secret_value())
            )
        if got.status_code != 200:
            log.warning("recording %s of %s: HTTP %s", url, call_id, got.status_code)
            return PlainTextResponse("the recording could not be fetched", 503)
        audio = self._audio.write(
            turn_audio_name(call_id, turn, "human"), got.content, provider="twilio"
        )
        await self._lines.line_event(call_id, LineEvent(kind="heard", turn=turn, audio=audio))
        return twiml(self._hold(call_id))

    async def _digits(self, request: Request) -> Response:
        """A key pressed at a <Gather>: the turn's answer, as its digit."""
        call_id = request.path_params["call_id"]
        form = await self._form(request)
        if form is None:
            return self._forbidden()
        turn = int(request.query_params.get("turn", "0"))
        digits = form.get("Digits", "")
        if turn > 0 and digits:
            event = LineEvent(kind="heard", turn=turn, text=digits, detail="keypad")
            await self._lines.line_event(call_id, event)
        return twiml(self._hold(call_id))

    async def _played(self, request: Request) -> Response:
        call_id = request.path_params["call_id"]
        if await self._form(request) is None:
            return self._forbidden()
        turn = int(request.query_params.get("turn", "0"))
        await self._lines.line_event(call_id, LineEvent(kind="played", turn=turn))
        return self._for_line(call_id, await self._lines.current_line(call_id))

    async def _status(self, request: Request) -> Response:
        call_id = request.path_params["call_id"]
        form = await self._form(request)
        if form is None:
            return self._forbidden()
        end = call_end(form)
        if end is not None:
            kind = STATUS_EVENTS[end.status]
            event = LineEvent(kind=kind, detail=end.status)
            await self._lines.line_event(call_id, event)
            if kind == "hangup":
                self._served.pop(call_id, None)
        return Response(status_code=204)

    async def _media(self, request: Request) -> Response:
        name = f"{request.path_params['call_id']}/{request.path_params['file']}"
        try:
            check_audio_name(name)
        except ValueError:
            return PlainTextResponse("not found", 404)
        query = request.query_params
        if not self._signer.check(name, query.get("exp", ""), query.get("sig", "")):
            return PlainTextResponse("forbidden: expired or forged media URL", 403)
        try:
            data = self._audio.read(name)
        except OSError:
            return PlainTextResponse("not found", 404)
        media_type = "audio/mpeg" if name.endswith(".mp3") else "audio/wav"
        return Response(data, media_type=media_type)
