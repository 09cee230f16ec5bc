"""Anthropic's Messages API for tests, as Claude Code calls it: a scripted model.

``POST /v1/messages`` (Claude Code adds ``?beta=true``) answers with Messages SSE when the
request says ``stream: true`` (``message_start``, ``content_block_start/delta/stop`` with
``text_delta`` or ``input_json_delta``, ``message_delta`` with the ``stop_reason``,
``message_stop``) and with one JSON message otherwise; ``/v1/messages/count_tokens`` counts.

A test scripts the model's turns: ``on("please run ls", bash("ls"), text("done"))`` answers the
first request whose *new* human text contains "please run ls" with a Bash tool call, and the
request that carries that call's result with "done". Requests without ``tools`` are Claude Code's
side requests (a session's title…): they get a short text and touch no script. A step may hold
its turn busy, for a delay or until the test releases it (``hold``), so a test can act mid-turn.

Claude Code rearranges its conversation (the last tool result and the next prompt share one user
message, assistant turns are merged), so "the last message" is not "the new prompt": the fake
counts the human texts and the tool results it has already seen. It records every human text
(``human_texts``) and tool result (``tool_results``) the model saw, for the test's asserts.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.serve import LocalServer

# Claude Code adds context to a user message as text blocks in this wrapper; not the human's.
_REMINDER = "<system-reminder>"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Step:
    """One answer of the model: text, or one tool call (then the turn goes on with its result).

    ``delay`` seconds, or until ``hold`` is set, pass before the answer streams (pings keep the
    stream alive), so the agent is busy meanwhile."""

    text: str | None = None
    tool: str | None = None
    input: dict[str, Any] = field(default_factory=dict)
    delay: float = 0.0
    hold: asyncio.Event | None = None


def text(words: str, *, delay: float = 0.0, hold: asyncio.Event | None = None) -> Step:
    return Step(text=words, delay=delay, hold=hold)


def tool(
    name: str, *, delay: float = 0.0, hold: asyncio.Event | None = None, **tool_input: Any
) -> Step:
    return Step(tool=name, input=tool_input, delay=delay, hold=hold)


def bash(command: str, *, delay: float = 0.0, hold: asyncio.Event | None = None) -> Step:
    return tool("Bash", command=command, description="Run a command", delay=delay, hold=hold)


@dataclass(frozen=True)
class ToolResult:
    tool_use_id: str
    content: str
    is_error: bool


@dataclass
class _Rule:
    contains: str
    steps: list[Step]
    once: bool


class FakeAnthropic:
    def __init__(self, *, default: Step | None = None, side_answer: str = "Chat") -> None:
        self.default = default or text("OK.")
        self.side_answer = side_answer
        self.human_texts: list[str] = []  # every new human text the model saw, in order
        self.tool_results: list[ToolResult] = []
        self.requests: list[dict[str, Any]] = []  # every body, side requests included
        self.other_paths: list[str] = []  # requests to paths this fake does not speak
        self._rules: list[_Rule] = []
        self._seen_humans: list[str] = []  # the main conversation's human texts, as last seen
        self._seen_results: set[str] = set()
        self._pending: list[Step] = []  # the running turn's next steps
        self._turns = asyncio.Condition()
        app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/{path:path}", self._other, methods=["GET", "POST", "PUT", "DELETE"]),
            ]
        )
        self.server = LocalServer(app)

    # ---- the test's side -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What ``ANTHROPIC_BASE_URL`` is set to."""
        return self.server.url

    def on(self, contains: str, *steps: Step, once: bool = True) -> None:
        """When a new human text contains `contains`, play `steps` as the turn: each tool call's
        result brings the next step; a turn whose steps ran out ends with the default text.
        Rules are tried in the order given; a ``once`` rule is used up by its first match."""
        self._rules.append(_Rule(contains, list(steps), once))

    async def wait_for_human(self, contains: str, *, timeout: float = 30) -> str:
        """The first human text the model saw containing `contains`, once it saw it."""
        async with self._turns:
            await asyncio.wait_for(
                self._turns.wait_for(lambda: self._human_with(contains) is not None), timeout
            )
            found = self._human_with(contains)
            assert found is not None
            return found

    def _human_with(self, contains: str) -> str | None:
        return next((t for t in self.human_texts if contains in t), None)

    # ---- reading Claude Code's conversation ------------------------------------------------------

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

    async def _next_step(self, body: dict[str, Any]) -> Step:
        """The answer to a request of the main conversation, from what is new in it."""
        humans, results = self._human_and_results(body.get("messages", []))
        shared = 0
        for seen, now in zip(self._seen_humans, humans, strict=False):
            if seen != now:
                break
            shared += 1
        new_humans = humans[shared:]  # a conversation that started over is new from its start
        self._seen_humans = humans
        new_results = [r for r in results if r.tool_use_id not in self._seen_results]
        self._seen_results.update(r.tool_use_id for r in new_results)
        async with self._turns:
            self.human_texts.extend(new_humans)
            self.tool_results.extend(new_results)
            self._turns.notify_all()
        for words in new_humans:
            rule = next((r for r in self._rules if r.contains in words), None)
            if rule is not None:
                if rule.once:
                    self._rules.remove(rule)
                self._pending = list(rule.steps)
                break
        else:
            if new_humans and not new_results:
                self._pending = []  # a new prompt no rule knows: the default answers it
        if self._pending:
            return self._pending.pop(0)
        return self.default if new_humans else text("Done.")

    # ---- the API ---------------------------------------------------------------------------------

    async def _messages(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        model = str(body.get("model", "claude"))
        if body.get("tools"):
            step = await self._next_step(body)
        else:
            step = text(self.side_answer)
        if body.get("stream"):
            return StreamingResponse(
                _stream(step, model),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        await _wait(step)
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


async def _wait(step: Step) -> None:
    if step.delay:
        await asyncio.sleep(step.delay)
    if step.hold is not None:
        await step.hold.wait()


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
    waiting = asyncio.ensure_future(_wait(step))
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
