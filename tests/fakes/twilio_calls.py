"""Twilio Programmable Voice for tests: the Calls REST API the `twilio` SDK calls, and a phone
network behind it that behaves like Twilio's.

A created call rings, then (as the scenario says) is answered by the human or a machine, is busy,
or is not answered. It sends signed status callbacks, fetches our TwiML and carries it out:
``<Play>`` downloads the audio and checks it is a WAV, ``<Record>`` answers with a recording
(the scripted human's words said by espeak-ng, served under the account's Recordings with basic
auth), ``<Pause>`` holds until the time is up or the call is updated with a new URL,
``<Redirect>`` fetches the next TwiML, ``<Hangup>`` ends the call. ``<Gather>`` plays what it
holds, then, when the scripted human's next answer is a :class:`Press`, posts its digits to the
action as Twilio does (``Digits``); a None hangs up there; otherwise it times out and the call
goes on to the next verb. A :class:`HangsUp` at a ``<Record>`` is a message said and then hung up
on: Twilio still posts the recording to the action (``Digits=hangup``) and ignores what it is
told, before or (``after_end``) only after the call's end was reported, as the test says when. A
recording is served once Twilio has processed it: at once here, unless ``slow_recordings`` (then
it 404s, as Twilio's may for a moment, until the test says it was processed,
:meth:`FakeTwilioCalls.recordings_processed`, which may also say one complete that still 404s).
A ``<Record>`` with a ``recordingStatusCallback`` is told at the beep that its recording began
(``in-progress``), and once it was processed that it is completed, or absent when nothing came
of it, each if it asked for that event (``recordingStatusCallbackEvent``, completed by default):
the latter right after its action, or (``late_recording_callbacks``) when the test says. A call
coming in reports its end to the number's status callback, as a call placed does to its own.
Every request it makes to us is signed exactly as Twilio signs
(``RequestValidator.compute_signature`` over the URL given).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Literal

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from twilio.request_validator import RequestValidator

from agentcomms.voice.tts.local import EspeakSpeech
from tests.fakes.serve import LocalServer
from tests.fakes.twilio import ACCOUNT_SID, AUTH_TOKEN

Scenario = Literal["human", "machine", "busy", "no-answer"]


@dataclass(frozen=True)
class Press:
    """The human keys digits at a <Gather> instead of speaking."""

    digits: str


@dataclass(frozen=True)
class HangsUp:
    """At a <Record>, the human says `words` and hangs up instead of pressing #. Twilio's request
    to the Record's action may come after the call's status callback (`after_end`): it is then
    held until the test sends it (:meth:`FakeTwilioCalls.send_late`)."""

    words: str
    after_end: bool = False


@dataclass
class FakeCall:
    sid: str
    to: str
    from_: str
    url: str
    status_callback: str
    timeout_s: float
    # What the human says at each <Record> (or keys at a <Gather>); None: hangs up.
    answers: list[str | Press | HangsUp | None]
    status: str = "queued"
    started: float = 0.0
    duration: str | None = None  # the CallDuration its end reported
    statuses: list[str] = field(default_factory=list)
    played: list[str] = field(default_factory=list)  # media URLs fetched, each a WAV
    said: list[str] = field(default_factory=list)
    twiml: list[str] = field(default_factory=list)  # every document we were given
    redirect_to: str | None = None
    hangup_requested: bool = False
    # The status our REST update ended it with: "canceled" (while it rang) or "completed".
    ended_by_update: str | None = None
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # Requests Twilio still owes us once the call's end was reported: (url, form).
    late: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    # Recordings still being processed: (sid, their audio, the <Record> verb, its action's form).
    processing: list[tuple[str, bytes, ET.Element, dict[str, str]]] = field(default_factory=list)
    # Each recording status callback sent once the recording was processed: (its URL, its
    # form, our HTTP status); and the recordings said begun (in-progress), by sid.
    recording_callbacks: list[tuple[str, dict[str, str], int]] = field(default_factory=list)
    recordings_begun: list[str] = field(default_factory=list)


class FakeTwilioCalls:
    def __init__(self, account_sid: str = ACCOUNT_SID, auth_token: str = AUTH_TOKEN) -> None:
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.scenario: Scenario = "human"
        self.answers: list[str | Press | HangsUp | None] = []
        self.calls: dict[str, FakeCall] = {}
        self.recordings: dict[str, bytes] = {}
        # Recordings are processed only when the test says so: till then they 404.
        self.slow_recordings = False
        # Recordings served at once, but their status callbacks sent only when the test says.
        self.late_recording_callbacks = False
        self.not_ready: list[str] = []  # recordings fetched before they were served (404)
        self.problems: list[str] = []  # what a real Twilio would have refused or failed at
        self._tasks: set[asyncio.Task[None]] = set()
        base = "/2010-04-01/Accounts/{account}"
        self.server = LocalServer(
            Starlette(
                routes=[
                    Route(f"{base}/Calls.json", self._create, methods=["POST"]),
                    Route(f"{base}/Calls/{{sid}}.json", self._update, methods=["POST"]),
                    Route(f"{base}/Recordings/{{sid}}.wav", self._recording, methods=["GET"]),
                ]
            )
        )

    @property
    def base_url(self) -> str:
        return self.server.url

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.server.stop()

    # ---- REST ---------------------------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        credentials = f"{self.account_sid}:{self.auth_token}".encode()
        expected = "Basic " + base64.b64encode(credentials).decode()
        return (
            request.path_params["account"] == self.account_sid
            and request.headers.get("authorization") == expected
        )

    def _resource(self, call: FakeCall) -> JSONResponse:
        return JSONResponse(
            {
                "sid": call.sid,
                "account_sid": self.account_sid,
                "to": call.to,
                "from": call.from_,
                "status": call.status,
                "direction": "outbound-api",
            },
            status_code=201,
        )

    async def _create(self, request: Request) -> Response:
        if not self._authorized(request):
            return JSONResponse({"code": 20003, "message": "Authenticate", "status": 401}, 401)
        form = await request.form()
        call = FakeCall(
            sid="CA" + secrets.token_hex(16),
            to=str(form["To"]),
            from_=str(form["From"]),
            url=str(form["Url"]),
            status_callback=str(form.get("StatusCallback", "")),
            timeout_s=float(str(form.get("Timeout", "60"))),
            answers=list(self.answers),
        )
        self.calls[call.sid] = call
        task = asyncio.create_task(self._dial(call))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return self._resource(call)

    async def _update(self, request: Request) -> Response:
        if not self._authorized(request):
            return JSONResponse({"code": 20003, "message": "Authenticate", "status": 401}, 401)
        call = self.calls.get(request.path_params["sid"])
        if call is None:
            return JSONResponse({"code": 20404, "message": "Not found", "status": 404}, 404)
        form = await request.form()
        if form.get("Status") in ("completed", "canceled"):
            call.hangup_requested = True
            call.ended_by_update = str(form["Status"])
        if form.get("Url"):
            call.redirect_to = str(form["Url"])
        call.woken.set()
        return self._resource(call)

    async def _recording(self, request: Request) -> Response:
        if not self._authorized(request):
            return Response(status_code=401)
        sid = request.path_params["sid"]
        data = self.recordings.get(sid)
        if data is None:
            self.not_ready.append(sid)
            return Response(status_code=404)
        return Response(data, media_type="audio/x-wav")

    # ---- the phone network --------------------------------------------------------------------

    async def _status(self, call: FakeCall, status: str, **extra: str) -> None:
        call.status = status
        call.statuses.append(status)
        if call.status_callback:
            await self._post(call, call.status_callback, {"CallStatus": status, **extra})

    async def _completed(self, call: FakeCall) -> None:
        call.duration = str(round(time.monotonic() - call.started))
        await self._status(call, "completed", CallDuration=call.duration)

    def signature(self, url: str, form: dict[str, str]) -> str:
        """What Twilio would sign `form` posted to `url` with."""
        return str(RequestValidator(self.auth_token).compute_signature(url, form))

    async def send_late(self, call: FakeCall) -> None:
        """Send what Twilio still owed once the call's end was reported (what it answers is
        ignored: nobody is on the line)."""
        while call.late:
            url, form = call.late.pop(0)
            await self._post(call, url, form)
        if not (self.slow_recordings or self.late_recording_callbacks):
            await self.recordings_processed(call)

    async def recordings_processed(
        self, call: FakeCall, status: str = "completed", *, served: bool = True
    ) -> None:
        """Twilio is done processing the call's recordings: each is served (completed) or never
        will be (absent), and its <Record>'s recording status callback is told, if it asked.
        A completed one not `served` still 404s, as Twilio's may for a while: the test serves
        it later (:attr:`recordings`), or never."""
        while call.processing:
            sid, audio, verb, form = call.processing.pop(0)
            if status == "completed" and served:
                self.recordings[sid] = audio
            callback = verb.get("recordingStatusCallback", "")
            events = verb.get("recordingStatusCallbackEvent", "completed").split()
            if not callback or status not in events:
                continue
            told = {
                "AccountSid": self.account_sid,
                "CallSid": call.sid,
                "RecordingSid": sid,
                "RecordingUrl": form["RecordingUrl"],
                "RecordingStatus": status,
                "RecordingDuration": form["RecordingDuration"] if status == "completed" else "0",
                "RecordingChannels": "1",
                "RecordingSource": "RecordVerb",
            }
            response = await self._signed_post(callback, told)
            call.recording_callbacks.append((callback, told, response.status_code))

    async def _recording_began(
        self, call: FakeCall, verb: ET.Element, sid: str, recording_url: str
    ) -> None:
        """At the beep: a <Record> that asked for in-progress events is told it began."""
        callback = verb.get("recordingStatusCallback", "")
        if not callback or "in-progress" not in verb.get("recordingStatusCallbackEvent", ""):
            return
        told = {
            "AccountSid": self.account_sid,
            "CallSid": call.sid,
            "RecordingSid": sid,
            "RecordingUrl": recording_url,
            "RecordingStatus": "in-progress",
            "RecordingDuration": "-1",
            "RecordingChannels": "1",
            "RecordingSource": "RecordVerb",
        }
        await self._signed_post(callback, told)
        call.recordings_begun.append(sid)

    async def report_end(self, call: FakeCall) -> None:
        """Report the call's end to its status callback again, as Twilio may."""
        await self._status(call, call.status, CallDuration=call.duration or "0")

    async def _signed_post(self, url: str, form: dict[str, str]) -> httpx.Response:
        signature = RequestValidator(self.auth_token).compute_signature(url, form)
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(url, data=form, headers={"X-Twilio-Signature": signature})
        if response.status_code >= 400:
            self.problems.append(f"{url}: HTTP {response.status_code} {response.text}")
        return response

    async def _post(self, call: FakeCall, url: str, params: dict[str, str]) -> str:
        form = {
            "AccountSid": self.account_sid,
            "CallSid": call.sid,
            "From": call.from_,
            "To": call.to,
            "Direction": "outbound-api",
            "CallStatus": call.status,
            **params,
        }
        return (await self._signed_post(url, form)).text

    async def _dial(self, call: FakeCall) -> None:
        try:
            await self._status(call, "initiated")
            await self._status(call, "ringing")
            if self.scenario == "busy":
                await self._status(call, "busy")
                return
            if self.scenario == "no-answer":
                await self._wait(call, call.timeout_s)
                # Canceled while it rang, Twilio says so (any other update rings on).
                await self._status(call, "canceled" if call.hangup_requested else "no-answer")
                return
            call.status = "in-progress"
            call.started = time.monotonic()
            answered_by = "machine_start" if self.scenario == "machine" else "human"
            document = await self._post(call, call.url, {"AnsweredBy": answered_by})
            await self._carry_out(call, document)
            await self._completed(call)
        except Exception as exc:  # a test reads problems; the fake itself must not die silently
            self.problems.append(f"{call.sid}: {type(exc).__name__}: {exc}")
            raise
        finally:
            call.done.set()

    async def _wait(self, call: FakeCall, seconds: float) -> bool:
        """Wait `seconds`, or less when the call is updated; True when woken."""
        call.woken.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(call.woken.wait(), seconds)
            return True
        return False

    async def _carry_out(self, call: FakeCall, document: str) -> None:
        while document is not None and not call.hangup_requested:
            call.twiml.append(document)
            next_document: str | None = None
            for verb in ET.fromstring(document):
                if call.hangup_requested:
                    return
                if verb.tag == "Play":
                    await self._play(call, (verb.text or "").strip())
                elif verb.tag == "Say":
                    call.said.append(verb.text or "")
                elif verb.tag == "Hangup":
                    call.statuses.append("hangup")
                    return
                elif verb.tag == "Reject":  # never answered: busy, or not in service
                    call.statuses.append("reject")
                    call.status = "busy" if verb.get("reason") == "busy" else "no-answer"
                    return
                elif verb.tag == "Redirect":
                    next_document = await self._post(call, (verb.text or "").strip(), {})
                    break
                elif verb.tag == "Pause":
                    if await self._wait(call, float(verb.get("length", "1"))):
                        if call.hangup_requested:
                            return
                        if call.redirect_to:  # an update points the call elsewhere
                            url, call.redirect_to = call.redirect_to, None
                            next_document = await self._post(call, url, {})
                            break
                elif verb.tag == "Gather":
                    for inner in verb:
                        if inner.tag == "Play":
                            await self._play(call, (inner.text or "").strip())
                        elif inner.tag == "Say":
                            call.said.append(inner.text or "")
                    action = verb.get("action", "")
                    if call.answers and call.answers[0] is None:  # the human hangs up
                        return
                    if call.answers and isinstance(call.answers[0], Press):
                        press = call.answers.pop(0)
                        assert isinstance(press, Press)
                        next_document = await self._post(call, action, {"Digits": press.digits})
                        break
                    spoken = "speech" in verb.get("input", "")
                    if spoken and call.answers and isinstance(call.answers[0], str):
                        # Twilio's own recognizer heard it: exactly, in the fake.
                        said = {"SpeechResult": str(call.answers.pop(0)), "Confidence": "0.9"}
                        next_document = await self._post(call, action, said)
                        break
                elif verb.tag == "Record":
                    if not call.answers or isinstance(call.answers[0], Press):
                        continue  # silence: Twilio goes on to the next verb
                    answer = call.answers.pop(0)
                    if answer is None:  # the human hangs up
                        return
                    if isinstance(answer, HangsUp):
                        url, form = await self._recorded(call, verb, answer.words, hung_up=True)
                        if answer.after_end:
                            call.late.append((url, form))
                        else:
                            await self._post(call, url, form)  # its answer plays to nobody
                            if not (self.slow_recordings or self.late_recording_callbacks):
                                await self.recordings_processed(call)
                        return
                    assert isinstance(answer, str)
                    url, form = await self._recorded(call, verb, answer)
                    next_document = await self._post(call, url, form)
                    if not (self.slow_recordings or self.late_recording_callbacks):
                        await self.recordings_processed(call)
                    break
            if next_document is None:
                return
            document = next_document

    async def incoming(
        self,
        from_: str,
        url: str,
        answers: list[str | Press | HangsUp | None],
        to: str = "",
        status_callback: str = "",
    ) -> FakeCall:
        """A call from `from_` to our number: Twilio asks `url` (the "A call comes in"
        webhook) what to do and carries it out, the caller answering as `answers` say; its end
        goes to `status_callback`, the number's (none: not set on the number)."""
        call = FakeCall(
            sid="CA" + secrets.token_hex(16),
            to=to,
            from_=from_,
            url=url,
            status_callback=status_callback,
            timeout_s=60,
            answers=list(answers),
        )
        self.calls[call.sid] = call
        call.status = "ringing"
        try:
            document = await self._post(call, url, {"Direction": "inbound"})
            call.status = "in-progress"
            call.started = time.monotonic()
            await self._carry_out(call, document)
            if call.status == "in-progress":
                await self._completed(call)
            else:  # rejected before it was answered
                await self._status(call, call.status)
        finally:
            call.done.set()
        return call

    async def _play(self, call: FakeCall, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.get(url)
        if response.status_code != 200 or response.content[:4] != b"RIFF":
            self.problems.append(f"<Play> {url}: HTTP {response.status_code}, not a WAV")
            return
        call.played.append(url)

    async def _recorded(
        self, call: FakeCall, verb: ET.Element, answer: str, *, hung_up: bool = False
    ) -> tuple[str, dict[str, str]]:
        """The human's words recorded: the request to the Record's action that brings them
        (``Digits`` says how the recording ended: "hangup" when the caller hung up). The
        recording itself is being processed (served once it was)."""
        audio, _ = await EspeakSpeech().synthesize(answer)
        sid = "RE" + secrets.token_hex(16)
        recording_url = f"{self.base_url}/2010-04-01/Accounts/{self.account_sid}/Recordings/{sid}"
        await self._recording_began(call, verb, sid, recording_url)
        form = {
            "RecordingSid": sid,
            "RecordingUrl": recording_url,
            "RecordingDuration": "2",
            "RecordingStatus": "completed",
        }
        if hung_up:
            form["Digits"] = "hangup"
        call.processing.append((sid, audio, verb, form))
        if not self.slow_recordings:  # served at once; its status callback follows the action
            self.recordings[sid] = audio
        return verb.get("action", ""), form
