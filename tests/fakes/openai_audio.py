"""OpenAI's audio endpoints for tests, as the `openai` SDK calls them: speech (a WAV of the input,
said by espeak-ng so it is real audio) and transcriptions (the scripted words, for a WAV file)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentcomms.voice.tts.local import EspeakSpeech
from tests.fakes.serve import FakeAPI, upload

API_KEY = "sk-test-openai"


def _error(status: int, message: str, kind: str) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return JSONResponse(body, status_code=status)


class FakeOpenAIAudio(FakeAPI):
    def __init__(self, api_key: str = API_KEY) -> None:
        super().__init__(
            Route("/v1/audio/speech", self._speech, methods=["POST"]),
            Route("/v1/audio/transcriptions", self._transcribe, methods=["POST"]),
        )
        self.api_key = api_key
        self.spoken: list[dict[str, str]] = []  # each speech request's model, voice, input
        self.heard: list[dict[str, str]] = []  # each transcription's model, language
        self.transcripts: list[str] = []  # what the next transcriptions answer

    @property
    def base_url(self) -> str:
        return f"{self.server.url}/v1"  # where the SDK's paths start

    def _refusal(self, request: Request) -> JSONResponse | None:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided.", "invalid_request_error")
        if (status := self._next_failure()) is not None:
            return _error(status, "The server had an error.", "server_error")
        return None

    async def _speech(self, request: Request) -> Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        body = await request.json()
        if body.get("response_format") != "wav" or not body.get("input"):
            return _error(400, "expected input and response_format wav", "invalid_request_error")
        self.spoken.append({k: body[k] for k in ("model", "voice", "input")})
        audio, _ = await EspeakSpeech().synthesize(body["input"])
        return Response(audio, media_type="audio/wav")

    async def _transcribe(self, request: Request) -> Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        audio, fields = await upload(request, "model", "language")
        if audio[:4] != b"RIFF":
            return _error(400, "file: expected a WAV recording", "invalid_request_error")
        self.heard.append(fields)
        text = self.transcripts.pop(0) if self.transcripts else ""
        return JSONResponse({"text": text})
