"""Google's Gemini API for tests, as Gemini CLI calls it with an API key: a scripted model
(``tests/fakes/scripted.py`` says how a test scripts its turns).

``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` answers with SSE, one
``GenerateContentResponse`` per ``data:`` line (``candidates[0].content.parts``: a ``text``, or a
``functionCall`` ``{name, args, id}``; the last one with ``finishReason: STOP``);
``:generateContent`` answers with one JSON response; ``:countTokens`` counts. Requests without
``tools`` are Gemini CLI's side requests (the next-speaker check, routing…): they get a short
answer and touch no script, JSON when the request asks for JSON. In a request, the human's words
are the ``text`` parts of ``user`` contents, except the session context Gemini CLI opens every
conversation with; tool results are ``functionResponse`` parts.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.scripted import ScriptedModel, Step, ToolResult, text, tool
from tests.fakes.serve import LocalServer

__all__ = ["FakeGemini", "Step", "ToolResult", "shell", "text", "tool"]

_ids = itertools.count(1)
# Gemini CLI's first user content: the session's context (date, folder, files), not the human.
_CONTEXT_MARKS = ("<session_context>", "This is the Gemini CLI.")


def shell(command: str, *, delay: float = 0.0, hold: asyncio.Event | None = None) -> Step:
    """Gemini CLI's shell tool running `command`."""
    return tool(
        "run_shell_command",
        command=command,
        description="Run a command",
        delay=delay,
        hold=hold,
    )


class FakeGemini(ScriptedModel):
    def __init__(self, *, default: Step | None = None, side_answer: str = "Chat") -> None:
        super().__init__(default=default)
        self.side_answer = side_answer
        app = Starlette(
            routes=[
                Route("/v1beta/models/{call:path}", self._models, methods=["POST"]),
                Route("/{path:path}", self._other, methods=["GET", "POST", "PUT", "DELETE"]),
            ]
        )
        self.server = LocalServer(app)

    @property
    def base_url(self) -> str:
        """What ``GOOGLE_GEMINI_BASE_URL`` is set to."""
        return self.server.url

    @staticmethod
    def _human_and_results(contents: list[dict[str, Any]]) -> tuple[list[str], list[ToolResult]]:
        humans: list[str] = []
        results: list[ToolResult] = []
        for content in contents:
            if content.get("role") != "user":
                continue
            for part in content.get("parts") or []:
                words = part.get("text")
                if isinstance(words, str) and words:
                    if not words.lstrip().startswith(_CONTEXT_MARKS):
                        humans.append(words)
                answered = part.get("functionResponse")
                if isinstance(answered, dict):
                    response = answered.get("response") or {}
                    error = isinstance(response, dict) and "error" in response
                    output = response.get("error" if error else "output", response)
                    results.append(
                        ToolResult(
                            str(answered.get("id") or answered.get("name") or ""),
                            output if isinstance(output, str) else json.dumps(output),
                            bool(error),
                        )
                    )
        return humans, results

    # ---- the API ---------------------------------------------------------------------------------

    async def _models(self, request: Request) -> Response:
        call = request.path_params["call"]
        model, _, method = call.partition(":")
        body = await request.json()
        if method == "countTokens":
            return JSONResponse({"totalTokens": max(1, len(json.dumps(body)) // 4)})
        if method not in ("streamGenerateContent", "generateContent"):
            return await self._other(request)
        self.requests.append(body)
        if body.get("tools"):
            step = await self.next_step(*self._human_and_results(body.get("contents", [])))
            step = step.answering(body)
        else:
            step = _side_answer(body, self.side_answer)
        if method == "streamGenerateContent":
            return StreamingResponse(
                _stream(step, model),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        await step.wait()
        return JSONResponse(_response(step, model))

    async def _other(self, request: Request) -> Response:
        self.other_paths.append(f"{request.method} {request.url.path}")
        return JSONResponse({"error": {"code": 404, "status": "NOT_FOUND"}}, 404)


def _side_answer(body: dict[str, Any], words: str) -> Step:
    """Gemini CLI's side requests that ask for JSON (the router's complexity score, the
    next-speaker check) get an object of the schema asked for: the human speaks next."""
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if config.get("responseMimeType") != "application/json" or not isinstance(schema, dict):
        return text(words)
    answer: dict[str, Any] = {}
    for name, field in (schema.get("properties") or {}).items():
        kind = str((field or {}).get("type", "string")).lower()
        if name == "next_speaker":
            answer[name] = "user"
        elif kind in ("integer", "number"):
            answer[name] = 10
        elif kind == "boolean":
            answer[name] = False
        else:
            answer[name] = "A simple request."
    return text(json.dumps(answer))


def _part(step: Step) -> dict[str, Any]:
    if step.tool is not None:
        call_id = f"call_fake{next(_ids):06d}"
        return {"functionCall": {"id": call_id, "name": step.tool, "args": step.input}}
    return {"text": step.text or ""}


def _response(step: Step, model: str, *, part: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [part or _part(step)]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": model,
    }


def _data(response: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(response)}\n\n".encode()


async def _stream(step: Step, model: str) -> AsyncIterator[bytes]:
    waiting = asyncio.ensure_future(step.wait())
    try:
        while not waiting.done():
            await asyncio.wait({waiting}, timeout=1.0)
    finally:
        waiting.cancel()
    yield _data(_response(step, model))
