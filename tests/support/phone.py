"""The human's side of a call on the local phone: the gateway's phone protocol (`phone_wait`,
`phone_event`) spoken one step at a time, so each test decides exactly what the human does and
when."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agentcomms.voice.tts.local import EspeakSpeech
from tests.support.stack import Stack
from tests.support.waiting import eventually

T = TypeVar("T")


class Phone:
    """The human's side of the local phone, one step at a time."""

    def __init__(self, stack: Stack, phone_id: str = "test-phone") -> None:
        self.stack = stack
        self.phone_id = phone_id
        self.known: dict[str, int] = {}

    async def lines(self, timeout: float = 5) -> list[dict[str, Any]]:
        result = await self.stack.call("phone_wait", known=self.known, timeout=timeout)
        calls: list[dict[str, Any]] = result["calls"]
        for line in calls:
            self.known[line["call_id"]] = line["version"]
        return calls

    async def until(
        self, test: Callable[[dict[str, Any]], bool], timeout: float = 20
    ) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            return next((line for line in await self.lines(1) if test(line)), None)

        return await eventually(probe, timeout=timeout)

    async def ringing(self) -> str:
        line = await self.until(lambda line: line["state"] == "ringing")
        return str(line["call_id"])

    async def answer(self) -> str:
        call_id = await self.ringing()
        await self.event(call_id, "answered")
        return call_id

    async def prompt(self, call_id: str, expect: str = "answer") -> dict[str, Any]:
        """The turn in which the call waits for `expect` from this phone."""
        return await self.until(
            lambda line: line["call_id"] == call_id and line["expect"] == expect
        )

    async def event(self, call_id: str, kind: str, **fields: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self.stack.call(
            "phone_event", call_id=call_id, kind=kind, phone_id=self.phone_id, **fields
        )
        return result

    async def plays(self, call_id: str, turn: Awaitable[T]) -> T:
        """`turn` (words the call says without listening), played on this phone as a phone
        plays them: the call goes on once it is told so, not after the words' length and a
        slack for a phone that never says."""
        lines = await self.lines(timeout=0)
        before = max((line["turn"] for line in lines if line["call_id"] == call_id), default=0)
        said = asyncio.ensure_future(turn)
        line = await self.until(
            lambda line: (
                line["call_id"] == call_id and line["expect"] == "played" and line["turn"] > before
            )
        )
        await self.event(call_id, "played", turn=line["turn"])
        return await said

    async def reply(self, call_id: str, text: str) -> dict[str, Any]:
        line = await self.prompt(call_id)
        await self.event(call_id, "heard", turn=line["turn"], text=text)
        return line


async def answer_aloud(phone: Phone, call_id: str, words: str) -> dict[str, Any]:
    """The call's next prompt, answered with `words` said aloud (espeak-ng's voice)."""
    line = await phone.prompt(call_id)
    audio, _ = await EspeakSpeech().synthesize(words)
    await phone.event(
        call_id, "heard", turn=line["turn"], audio_b64=base64.b64encode(audio).decode()
    )
    return line
