"""OpenAI's Responses API for tests, as Codex calls it: a scripted model
(``tests/fakes/scripted.py`` says how a test scripts its turns).

``POST /v1/responses`` answers with Responses SSE when the request says ``stream: true``
(``response.created``, ``response.output_item.added``, ``response.output_text.delta`` for a
message, ``response.output_item.done`` with the whole item, ``response.completed``) and with one
JSON response otherwise. A tool call is a ``function_call`` item whose ``arguments`` are JSON
text, or, for a tool the request declares freeform (``"type": "custom"``: Codex's
``apply_patch`` on the models of its own catalog), a ``custom_tool_call`` whose ``input`` is the
step's ``input`` text (``patch``). In a request, the human's words are the ``input_text`` parts
of user messages that are not Codex's own context (``<environment_context>``,
``<user_instructions>``… start with ``<``, and ``# AGENTS.md`` instructions); tool results are
``function_call_output`` (``custom_tool_call_output``) items. A request without tools, or asking
for an answer in a JSON schema (a thread's title), is a side request, no turn.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.scripted import ScriptedModel, Step, ToolResult, text, tool
from tests.fakes.serve import LocalServer

__all__ = ["FakeResponses", "Step", "ToolResult", "patch", "shell", "text", "tool"]

_ids = itertools.count(1)


def shell(command: str, *, delay: float = 0.0, hold: asyncio.Event | None = None) -> Step:
    """Codex's shell tool running `command`."""
    return tool("exec_command", cmd=command, delay=delay, hold=hold)


def patch(text: str) -> Step:
    """Codex's edit tool applying `text` (``*** Begin Patch`` … ``*** End Patch``)."""
    return tool("apply_patch", input=text)


class FakeResponses(ScriptedModel):
    def __init__(self, *, default: Step | None = None, side_answer: str = "Chat") -> None:
        super().__init__(default=default)
        self.side_answer = side_answer
        app = Starlette(
            routes=[
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/{path:path}", self._other, methods=["GET", "POST", "PUT", "DELETE"]),
            ]
        )
        self.server = LocalServer(app)

    @property
    def base_url(self) -> str:
        """A provider's ``base_url`` (with ``/v1``)."""
        return f"{self.server.url}/v1"

    @staticmethod
    def _human_and_results(items: list[dict[str, Any]]) -> tuple[list[str], list[ToolResult]]:
        humans: list[str] = []
        results: list[ToolResult] = []
        for item in items:
            kind = item.get("type", "message")
            if kind == "message" and item.get("role") == "user":
                content = item.get("content")
                if isinstance(content, str):
                    content = [{"type": "input_text", "text": content}]
                for part in content or []:
                    words = part.get("text", "") if part.get("type") == "input_text" else ""
                    stripped = words.lstrip()
                    if words and not stripped.startswith(("<", "# AGENTS.md")):
                        humans.append(words)
            elif kind in ("function_call_output", "custom_tool_call_output"):
                output = item.get("output")
                if not isinstance(output, str):
                    output = json.dumps(output)
                results.append(ToolResult(str(item.get("call_id", "")), output, False))
        return humans, results

    async def _responses(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        items = body.get("input")
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
        answer_format = (body.get("text") or {}).get("format")
        if body.get("tools") and not answer_format:
            step = await self.next_step(*self._human_and_results(items or []))
            freeform = {t.get("name") for t in body["tools"] if t.get("type") == "custom"}
        else:  # a side request (a thread's title): it quotes the prompt, but is no turn
            step, freeform = text(self.side_answer), set()
        model = str(body.get("model", "gpt"))
        if body.get("stream"):
            return StreamingResponse(
                _stream(step, model, freeform),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        await step.wait()
        return JSONResponse(_response(model, [_item(step, freeform)], "completed"))

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [], "models": []})

    async def _other(self, request: Request) -> Response:
        self.other_paths.append(f"{request.method} {request.url.path}")
        return JSONResponse({"error": {"message": "not found", "type": "invalid_request"}}, 404)


def _item(step: Step, freeform: set[str]) -> dict[str, Any]:
    n = next(_ids)
    if step.tool is not None and step.tool in freeform:
        # A freeform tool takes its input as plain text, not JSON.
        return {
            "type": "custom_tool_call",
            "id": f"ctc_fake{n:06d}",
            "call_id": f"call_fake{n:06d}",
            "name": step.tool,
            "input": str(step.input.get("input", "")),
            "status": "completed",
        }
    if step.tool is not None:
        return {
            "type": "function_call",
            "id": f"fc_fake{n:06d}",
            "call_id": f"call_fake{n:06d}",
            "name": step.tool,
            "arguments": json.dumps(step.input),
            "status": "completed",
        }
    return {
        "type": "message",
        "id": f"msg_fake{n:06d}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": step.text or "", "annotations": []}],
    }


def _response(model: str, output: list[dict[str, Any]], status: str) -> dict[str, Any]:
    return {
        "id": f"resp_fake{next(_ids):06d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


async def _stream(step: Step, model: str, freeform: set[str]) -> AsyncIterator[bytes]:
    started = _response(model, [], "in_progress")
    yield _event("response.created", {"response": started})
    waiting = asyncio.ensure_future(step.wait())
    try:
        while not waiting.done():
            yield _event("response.in_progress", {"response": started})  # keeps the stream alive
            await asyncio.wait({waiting}, timeout=1.0)
    finally:
        waiting.cancel()
    item = _item(step, freeform)
    opened = {**item, "status": "in_progress"}
    if item["type"] == "message":
        opened["content"] = []
    yield _event("response.output_item.added", {"output_index": 0, "item": opened})
    if item["type"] == "message":
        words = item["content"][0]["text"]
        where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        yield _event("response.output_text.delta", {**where, "delta": words})
        yield _event("response.output_text.done", {**where, "text": words})
    yield _event("response.output_item.done", {"output_index": 0, "item": item})
    done = {**started, "status": "completed", "output": [item]}
    yield _event("response.completed", {"response": done})
