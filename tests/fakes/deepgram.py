"""Deepgram's REST speech endpoints for tests, as the `deepgram-sdk` calls them: Aura text to
speech (`/v1/speak`, a WAV said by espeak-ng so it is real audio) and prerecorded transcription
(`/v1/listen`, the scripted words in Deepgram's response shape, for a WAV or Ogg body)."""

from __future__ import annotations

import asyncio
import uuid

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentcomms.voice.tts.local import EspeakSpeech
from tests.fakes.serve import FakeAPI

API_KEY = "dg-test-deepgram"


def _error(status: int, code: str, message: str) -> JSONResponse:
    body = {"err_code": code, "err_msg": message, "request_id": str(uuid.uuid4())}
    return JSONResponse(body, status_code=status)


class FakeDeepgram(FakeAPI):
    def __init__(self, api_key: str = API_KEY) -> None:
        super().__init__(
            Route("/v1/speak", self._speak, methods=["POST"]),
            Route("/v1/listen", self._listen, methods=["POST"]),
        )
        self.api_key = api_key
        self.spoken: list[dict[str, str]] = []  # each speak request: model, text, encoding…
        self.audio: list[bytes] = []  # the audio each speak answer carried
        self.heard: list[dict[str, str]] = []  # each listen request's model, language
        self.transcripts: list[str] = []  # what the next transcriptions answer
        self.authorizations: list[str | None] = []  # the Authorization header of every request
        # A slow Deepgram: with ``hold`` set to an unset event, each transcription answers only
        # once the test sets it.
        self.hold: asyncio.Event | None = None

    def _refusal(self, request: Request) -> JSONResponse | None:
        authorization = request.headers.get("authorization")
        self.authorizations.append(authorization)
        if authorization != f"Token {self.api_key}":
            return _error(401, "INVALID_AUTH", "Invalid credentials.")
        if (status := self._next_failure()) is not None:
            if status == 429:
                return _error(429, "TOO_MANY_REQUESTS", "Too many requests.")
            return _error(status, "INTERNAL_SERVER_ERROR", "Something went wrong.")
        return None

    async def _speak(self, request: Request) -> Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        body = await request.json()
        if not body.get("text"):
            return _error(400, "Bad Request", "text is required")
        query = request.query_params
        self.spoken.append(
            {
                "model": query.get("model", "aura-asteria-en"),
                "encoding": query.get("encoding", "mp3"),
                "container": query.get("container", "none"),
                "text": body["text"],
            }
        )
        audio, _ = await EspeakSpeech().synthesize(body["text"])
        self.audio.append(audio)
        return Response(audio, media_type="audio/wav")

    async def _listen(self, request: Request) -> Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        audio = await request.body()
        container = {b"RIFF": "wav", b"OggS": "ogg"}.get(audio[:4])
        if container is None:
            return _error(400, "Bad Request", "Bad Request: failed to process audio")
        query = request.query_params
        self.heard.append(
            {
                "model": query.get("model", "base"),
                "language": query.get("language", "en"),
                "container": container,
            }
        )
        if self.hold is not None:
            await self.hold.wait()
        text = self.transcripts.pop(0) if self.transcripts else ""
        words = [
            {
                "word": w.lower().strip(".,?!"),
                "start": i * 0.4,
                "end": i * 0.4 + 0.3,
                "confidence": 0.99,
                "punctuated_word": w,
            }
            for i, w in enumerate(text.split())
        ]
        request_id = str(uuid.uuid4())
        return JSONResponse(
            {
                "metadata": {
                    "transaction_key": "deprecated",
                    "request_id": request_id,
                    "sha256": "0" * 64,
                    "created": "2026-01-01T00:00:00.000Z",
                    "duration": round(len(audio) / 44_100, 3),
                    "channels": 1,
                    "models": [str(uuid.uuid4())],
                    "model_info": {},
                },
                "results": {
                    "channels": [
                        {"alternatives": [{"transcript": text, "confidence": 0.99, "words": words}]}
                    ]
                },
            }
        )
