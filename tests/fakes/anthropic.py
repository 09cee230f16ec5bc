"""Anthropic's Messages API for tests, as Claude Code calls it: a scripted model
(``tests/fakes/scripted.py`` says how a test scripts its turns).

``POST /v1/messages`` (Claude Code adds ``?beta=true``) answers with Messages SSE when the
request says ``stream: true`` (``message_start``, ``content_block_start/delta/stop`` with
``text_delta`` or ``input_json_delta``, ``message_delta`` with the ``stop_reason``,
``message_stop``) and with one JSON message otherwise; ``/v1/messages/count_tokens`` counts.
Requests without ``tools`` are Claude Code's side requests (a session's title…): they get a short
text and touch no script. In a request, the human's words are the user messages' ``text`` blocks
that are not a ``<system-reminder>``; tool results are ``tool_result`` blocks.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.scripted import ScriptedModel, Step, ToolResult, text, tool
from tests.fakes.serve import LocalServer

# The scripting is shared with the other models' fakes; a test imports it from here too.
__all__ = ["FakeAnthropic", "Step", "ToolResult", "bash", "text", "tool", "write_plan"]

# Claude Code adds context to a user message as text blocks in this wrapper; not the human's.
_REMINDER = "<system-reminder>"
_ids = itertools.count(1)


def bash(command: str, *, delay: float = 0.0, hold: asyncio.Event | None = None) -> Step:
    """Claude Code's Bash tool running `command`."""
    return tool("Bash", command=command, description="Run a command", delay=delay, hold=hold)


# In plan mode Claude Code tells the model where to write its plan (a new name each session).
_PLAN_FILE = re.compile(r"create your plan at (\S+) using the Write tool")


def write_plan(plan: str) -> Step:
    """In plan mode, Claude Code's Write tool writing `plan` to the plan file Claude named; its
    ``ExitPlanMode`` then reads the plan from there."""

    def into_plan_file(request: dict[str, Any]) -> dict[str, Any]:
        found = _PLAN_FILE.findall(json.dumps(request))
        assert found, "Claude Code named no plan file: is it in plan mode?"
        return {"file_path": found[-1], "content": plan}

    return Step(tool="Write", input_from=into_plan_file)


class FakeAnthropic(ScriptedModel):
    def __init__(self, *, default: Step | None = None, side_answer: str = "Chat") -> None:
        super().__init__(default=default)
        self.side_answer = side_answer
        app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/{path:path}", self._other, methods=["GET", "POST", "PUT", "DELETE"]),
            ]
        )
        self.server = LocalServer(app)

    @property
    def base_url(self) -> str:
        """What ``ANTHROPIC_BASE_URL`` is set to."""
        return self.server.url

    @staticmethod
    def _human_and_results(messages: list[dict[str, Any]]) -> tuple[list[str], list[ToolResult]]:
        humans: list[str] = []
        results: list[ToolResult] = []
        for message in messages:
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            for block in content or []:
                if block.get("type") == "text":
                    words = block.get("text", "")
                    if not words.lstrip().startswith(_REMINDER):
                        humans.append(words)
                elif block.get("type") == "tool_result":
                    results.append(
                        ToolResult(
                            block.get("tool_use_id", ""),
                            _result_text(block.get("content")),
                            bool(block.get("is_error")),
                        )
                    )
        return humans, results

    # ---- the API ---------------------------------------------------------------------------------

    async def _messages(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        model = str(body.get("model", "claude"))
        if body.get("tools"):
            step = await self.next_step(*self._human_and_results(body.get("messages", [])))
            step = step.answering(body)
        else:
            step = text(self.side_answer)
        if body.get("stream"):
            return StreamingResponse(
                _stream(step, model),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        await step.wait()
        return JSONResponse(_message(step, model))

    async def _count_tokens(self, request: Request) -> Response:
        body = await request.body()
        return JSONResponse({"input_tokens": max(1, len(body) // 4)})

    async def _other(self, request: Request) -> Response:
        self.other_paths.append(f"{request.method} {request.url.path}")
        return JSONResponse({"type": "error", "error": {"type": "not_found_error"}}, 404)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


def _blocks(step: Step) -> tuple[dict[str, Any], str]:
    """The content block a step answers with, and the turn's stop reason."""
    if step.tool is not None:
        block = {"type": "tool_use", "id": f"toolu_fake{next(_ids):06d}", "name": step.tool}
        return {**block, "input": step.input}, "tool_use"
    return {"type": "text", "text": step.text or ""}, "end_turn"


def _message(step: Step, model: str) -> dict[str, Any]:
    block, stop = _blocks(step)
    return {
        "id": f"msg_fake{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


async def _stream(step: Step, model: str) -> AsyncIterator[bytes]:
    message = _message(step, model)
    block = message["content"][0]
    yield _event("message_start", {"message": {**message, "content": [], "stop_reason": None}})
    waiting = asyncio.ensure_future(step.wait())
    try:
        while not waiting.done():
            # A long-held turn stays an open, live stream: Claude Code gives up on a silent one.
            yield _event("ping", {})
            await asyncio.wait({waiting}, timeout=1.0)
    finally:
        waiting.cancel()
    if block["type"] == "tool_use":
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    yield _event("content_block_start", {"index": 0, "content_block": start})
    yield _event("content_block_delta", {"index": 0, "delta": delta})
    yield _event("content_block_stop", {"index": 0})
    yield _event(
        "message_delta",
        {
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
    )
    yield _event("message_stop", {})
