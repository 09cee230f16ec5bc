"""A scripted model, whichever API it speaks (``anthropic``, ``openai_responses``): the test's
rules for each turn, and what the model saw.

A rule ``on("please run ls", bash("ls"), text("done"))`` answers the first request whose *new*
human text contains "please run ls" with a tool call, and the request that carries that call's
result with "done". A step may hold its turn busy, for a delay or until the test releases it
(``hold``), so a test can act mid-turn.

Agents rearrange their conversation (Claude Code folds the last tool result and the next prompt
into one user message, and merges assistant turns), so "the last message" is not "the new
prompt": the model counts the human texts and the tool results it has already seen, and records
every new one (``human_texts``, ``tool_results``) for the test's asserts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Step:
    """One answer of the model: text, or one tool call (then the turn goes on with its result).

    ``delay`` seconds, or until ``hold`` is set, pass before the answer streams (the stream
    stays alive meanwhile), so the agent is busy. ``input_from`` makes a tool call's input from
    the request it answers, for what only the agent knows (a path it told the model)."""

    text: str | None = None
    tool: str | None = None
    input: dict[str, Any] = field(default_factory=dict)
    delay: float = 0.0
    hold: asyncio.Event | None = None
    input_from: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def answering(self, request: dict[str, Any]) -> Step:
        """This step with its input made from `request`, where it is made so."""
        if self.input_from is None:
            return self
        return replace(self, input=self.input_from(request), input_from=None)

    async def wait(self) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.hold is not None:
            await self.hold.wait()


def text(words: str, *, delay: float = 0.0, hold: asyncio.Event | None = None) -> Step:
    return Step(text=words, delay=delay, hold=hold)


def tool(
    name: str, *, delay: float = 0.0, hold: asyncio.Event | None = None, **tool_input: Any
) -> Step:
    return Step(tool=name, input=tool_input, delay=delay, hold=hold)


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


class ScriptedModel:
    """The rules and the record; an API's fake reads each request into (human texts, tool
    results) and asks ``next_step`` for the answer."""

    def __init__(self, *, default: Step | None = None) -> None:
        self.default = default or text("OK.")
        self.human_texts: list[str] = []  # every new human text the model saw, in order
        self.tool_results: list[ToolResult] = []
        self.requests: list[dict[str, Any]] = []  # every body, side requests included
        self.other_paths: list[str] = []  # requests to paths the fake does not speak
        # When each request of the main conversation arrived (perf_counter), for benchmarks.
        self.arrivals: list[float] = []
        self._rules: list[_Rule] = []
        self._seen_humans: list[str] = []  # the main conversation's human texts, as last seen
        self._seen_results: set[str] = set()
        self._pending: list[Step] = []  # the running turn's next steps
        self._turns = asyncio.Condition()

    def result_after(self, seen: int) -> ToolResult | None:
        """The tool result that came after the first `seen` ones, None while none has: a test
        counts the results, acts, then waits for this one."""
        return self.tool_results[seen] if len(self.tool_results) > seen else None

    def on(self, contains: str, *steps: Step, once: bool = True) -> None:
        """When a new human text contains `contains`, play `steps` as the turn: each tool call's
        result brings the next step; a turn whose steps ran out ends with "Done.". Rules are
        tried in the order given; a ``once`` rule is used up by its first match."""
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

    async def next_step(self, humans: list[str], results: list[ToolResult]) -> Step:
        """The answer to a request of the main conversation, from what is new in it."""
        self.arrivals.append(time.perf_counter())
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
