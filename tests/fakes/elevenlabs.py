"""ElevenLabs' speech endpoints for tests, as the `elevenlabs` SDK calls them: text to speech (a
WAV of the text, said by espeak-ng so it is real audio), the voice search that resolves a name,
and speech to text (the scripted words, for a WAV file)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentcomms.voice.tts.local import EspeakSpeech
from tests.fakes.serve import FakeAPI, upload

API_KEY = "xi-test-elevenlabs"
RACHEL = "21m00Tcm4TlvDq8EOaVB"


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"detail": {"status": kind, "message": message}}, status_code=status)


class FakeElevenLabs(FakeAPI):
    def __init__(self, api_key: str = API_KEY) -> None:
        super().__init__(
            Route("/v1/text-to-speech/{voice_id}", self._speech, methods=["POST"]),
            Route("/v2/voices", self._voices, methods=["GET"]),
            Route("/v1/speech-to-text", self._transcribe, methods=["POST"]),
        )
        self.api_key = api_key
        self.voices: dict[str, str] = {"Rachel": RACHEL}  # the account's voices, name -> id
        self.spoken: list[dict[str, str]] = []  # each TTS request: voice_id, model_id, text…
        self.audio: list[bytes] = []  # the audio each TTS answer carried
        self.heard: list[dict[str, str]] = []  # each STT request: model_id, language_code
        self.transcripts: list[str] = []  # what the next transcriptions answer
        self.keys: list[str | None] = []  # the xi-api-key header of every request

    def _refusal(self, request: Request) -> JSONResponse | None:
        key = request.headers.get("xi-api-key")
        self.keys.append(key)
        if key != self.api_key:
            return _error(401, "invalid_api_key", "Invalid API key")
        if (status := self._next_failure()) is not None:
            if status == 429:
                return _error(429, "too_many_concurrent_requests", "Too many requests")
            return _error(status, "internal_error", "An internal error occurred")
        return None

    async def _speech(self, request: Request) -> Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        voice_id = request.path_params["voice_id"]
        if voice_id not in self.voices.values():
            return _error(404, "voice_not_found", f"A voice with id {voice_id} was not found")
        body = await request.json()
        if not body.get("text"):
            return _error(422, "invalid_request", "text is required")
        self.spoken.append(
            {
                "voice_id": voice_id,
                "model_id": body.get("model_id"),
                "text": body["text"],
                "output_format": request.query_params.get("output_format", "mp3_44100_128"),
            }
        )
        audio, _ = await EspeakSpeech().synthesize(body["text"])
        self.audio.append(audio)
        return Response(audio, media_type="audio/wav")

    async def _voices(self, request: Request) -> Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        search = request.query_params.get("search", "").lower()
        voices = [
            {"voice_id": vid, "name": name, "category": "premade"}
            for name, vid in self.voices.items()
            if search in name.lower()
        ]
        return JSONResponse(
            {
                "voices": voices,
                "has_more": False,
                "total_count": len(voices),
                "next_page_token": None,
            }
        )

    async def _transcribe(self, request: Request) -> Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        audio, fields = await upload(request, "model_id", "language_code")
        if audio[:4] != b"RIFF":
            return _error(400, "invalid_file", "file: expected a WAV recording")
        self.heard.append(fields)
        text = self.transcripts.pop(0) if self.transcripts else ""
        words = [
            {"text": w, "start": i * 0.4, "end": i * 0.4 + 0.3, "type": "word", "logprob": -0.1}
            for i, w in enumerate(text.split())
        ]
        return JSONResponse(
            {"language_code": "eng", "language_probability": 0.98, "text": text, "words": words}
        )
