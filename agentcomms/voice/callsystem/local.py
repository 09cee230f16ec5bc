"""The local phone (`agentcomms phone`): a terminal that rings when an agent calls.

It long-polls the gateway (`phone_wait`) for the lines of the calls to the local phone and
reports what happens on it (`phone_event`): answered, played, what the human said, hung up.
In a terminal it asks before answering and reads each answer typed; with standard input not a
terminal it answers at once and says the next line it reads each time an answer is wanted (an
empty line: silence; the end of the input: hang up), so a script can hold a conversation.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import os
import shutil
import signal
import sys
import tempfile
import threading
import uuid
import wave
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agentcomms.client import GatewayClient
from agentcomms.errors import AgentcommsError, GatewayError
from agentcomms.framing import strip_unsafe
from agentcomms.voice.models import MAX_PHONE_RECORDING_BYTES

# Players tried in order when the phone plays what the agent says.
PLAYERS: tuple[tuple[str, ...], ...] = (
    ("play", "-q"),  # sox
    ("aplay", "-q"),
    ("paplay",),
    ("afplay",),
)
# Recorders tried in order for `--mic`: 16 kHz mono 16-bit WAV, what every recognizer takes.
RECORDERS: tuple[tuple[str, ...], ...] = (
    ("rec", "-q", "-c", "1", "-r", "16000", "-b", "16"),  # sox: the file's extension says WAV
    ("arecord", "-q", "-f", "S16_LE", "-c", "1", "-r", "16000", "-t", "wav"),
)
WAV_HEADER_BYTES = 44  # a recording no longer than its header heard nothing
RECORDER_STOP_S = 5.0
POLL_S = 20.0
# A gateway that went away (restarted) is looked for again after these delays, doubling.
RECONNECT_FIRST_S = 0.25
RECONNECT_MAX_S = 5.0
HANGUP_WORDS = ("/hangup", "/bye")


def find_player() -> list[str] | None:
    return _first_installed(PLAYERS)


def find_recorder() -> list[str] | None:
    return _first_installed(RECORDERS)


def _first_installed(commands: tuple[tuple[str, ...], ...]) -> list[str] | None:
    for command in commands:
        path = shutil.which(command[0])
        if path:
            return [path, *command[1:]]
    return None


class Microphone:
    """The human's spoken answer: recorded from the moment it is asked for until the line
    (Enter) that ends it."""

    def __init__(self, recorder: list[str]) -> None:
        self._recorder = recorder
        self._proc: asyncio.subprocess.Process | None = None
        self._file: Path | None = None
        self.trouble: str | None = None  # why the last recording heard nothing, when known

    async def start(self) -> None:
        await self.stop()
        fd, name = tempfile.mkstemp(prefix="agentcomms-answer-", suffix=".wav")
        os.close(fd)
        self._file = Path(name)
        self._proc = await asyncio.create_subprocess_exec(
            *self._recorder,
            name,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )

    async def stop(self) -> bytes:
        """End the recording; the WAV recorded (empty when it heard nothing)."""
        proc, file, self._proc, self._file = self._proc, self._file, None, None
        if proc is None or file is None:
            return b""
        self.trouble = None
        if proc.returncode is None:
            # Both recorders finish the file (its header's length) on an interrupt.
            proc.send_signal(signal.SIGINT)
        try:
            _, err = await asyncio.wait_for(proc.communicate(), RECORDER_STOP_S)
        except TimeoutError:
            proc.kill()
            _, err = await proc.communicate()
        try:
            audio = file.read_bytes()
        finally:
            file.unlink(missing_ok=True)
        if len(audio) > WAV_HEADER_BYTES:
            return audio
        # The last line says why (sox: "rec FAIL sox: … no default audio device configured").
        said = (err or b"").decode(errors="replace").strip().splitlines()
        self.trouble = said[-1] if said else None
        return b""


class StdinLines:
    """Lines of standard input, read by a thread so the phone keeps listening to the line
    meanwhile; None once the input ends."""

    def __init__(self, stream: TextIO, loop: asyncio.AbstractEventLoop) -> None:
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.ended = False
        self._loop = loop
        self._stream = stream
        threading.Thread(target=self._read, name="phone-stdin", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                line = self._stream.readline()
            except (OSError, ValueError):
                line = ""
            self._loop.call_soon_threadsafe(self._queue.put_nowait, line or None)
            if not line:
                return

    async def next(self) -> str | None:
        line = await self._queue.get()
        if line is None:
            self.ended = True
            self._queue.put_nowait(None)  # every later read sees the end too
            return None
        return line.rstrip("\r\n")


@dataclass
class Ask:
    """An input the phone waits for: whether to answer a ringing call, or the human's words."""

    kind: str  # "ring" | "answer"
    call_id: str
    turn: int = 0


@dataclass
class LocalPhone:
    socket: Path
    interactive: bool
    player: list[str] | None = None
    speak: Callable[[str], Any] | None = None  # text -> WAV bytes (awaitable): answer aloud
    microphone: Microphone | None = None  # answers recorded, unless typed
    once: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)
    phone_id: str = field(default_factory=lambda: f"phone-{uuid.uuid4().hex[:8]}")

    def __post_init__(self) -> None:
        self._known: dict[str, int] = {}
        self._finished: set[str] = set()
        self._current: str | None = None
        self._asked: set[tuple[str, int]] = set()
        self._ask: Ask | None = None
        self._ask_task: asyncio.Task[str | None] | None = None
        self._done = False

    def say(self, text: str) -> None:
        self.out.write(strip_unsafe(text) + "\n")
        self.out.flush()

    async def run(self, lines: StdinLines) -> None:
        """Serve calls until the input ends with no call up (or, with `once`, one call ends)."""
        self._lines = lines
        self._gateway = GatewayClient(self.socket)
        await self._gateway.connect()
        try:
            self.say("local phone ready: waiting for calls (Ctrl-C to quit)")
            poll = asyncio.create_task(self._wait())
            try:
                while not self._done:
                    waiting: set[asyncio.Task[Any]] = {poll}
                    if self._ask_task is not None:
                        waiting.add(self._ask_task)
                    done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                    if self._ask_task is not None and self._ask_task in done:
                        ask, text = self._ask, self._ask_task.result()
                        self._ask = self._ask_task = None
                        assert ask is not None
                        await self._answered(ask, text)
                    if poll in done:
                        for line in poll.result():
                            await self._on_line(line)
                        if not self._done:
                            poll = asyncio.create_task(self._wait())
                    if self._lines.ended and self._current is None and self._ask is None:
                        self._done = True
            finally:
                poll.cancel()
                if self._ask_task is not None:
                    self._ask_task.cancel()
                if self.microphone is not None:
                    await self.microphone.stop()
                if self._current is not None:
                    # Ctrl-C or an error mid-call: the human put the phone down.
                    with contextlib.suppress(AgentcommsError, OSError, TimeoutError):
                        hangup = {"call_id": self._current, "kind": "hangup"}
                        await asyncio.wait_for(
                            self._gateway.call("phone_event", phone_id=self.phone_id, **hangup), 2
                        )
        finally:
            await self._gateway.close()

    async def _rpc(self, method: str, **params: Any) -> Any:
        """A gateway call that outlives a gateway restart: the call is on hold meanwhile (every
        phone request may be repeated: the call ignores what it has already heard)."""
        delay = RECONNECT_FIRST_S
        while True:
            used = self._gateway
            try:
                return await used.call(method, **params)
            except GatewayError:
                raise
            except (AgentcommsError, OSError) as exc:
                if delay == RECONNECT_FIRST_S:
                    self.say(f"gateway unreachable ({exc}); retrying")
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_S)
                if self._gateway is used:  # else another request reconnected already
                    await used.close()
                    self._gateway = GatewayClient(self.socket)
                    with contextlib.suppress(AgentcommsError, OSError):
                        await self._gateway.connect()

    async def _wait(self) -> list[dict[str, Any]]:
        known = dict(self._known)
        result = await self._rpc("phone_wait", known=known, timeout=POLL_S)
        return list(result["calls"])

    async def _event(self, call_id: str, kind: str, **fields: Any) -> bool:
        result = await self._rpc(
            "phone_event", call_id=call_id, kind=kind, phone_id=self.phone_id, **fields
        )
        return bool(result.get("accepted"))

    def _prompt(self, ask: Ask, prompt: str | None) -> None:
        if prompt and self.interactive:
            self.out.write(prompt)
            self.out.flush()
        self._ask = ask
        self._ask_task = asyncio.create_task(self._lines.next())

    async def _drop_ask(self, call_id: str) -> None:
        if self._ask is not None and self._ask.call_id == call_id and self._ask_task:
            self._ask_task.cancel()
            self._ask = self._ask_task = None
            if self.microphone is not None:
                await self.microphone.stop()
            if self.interactive:
                self.out.write("\n")

    async def _on_line(self, line: dict[str, Any]) -> None:
        call_id, state = line["call_id"], line["state"]
        if call_id in self._finished:
            return
        self._known[call_id] = line["version"]
        agent = line["agent_id"]
        if state == "ended":
            self._finished.add(call_id)
            self._known.pop(call_id, None)
            await self._drop_ask(call_id)
            reason = line.get("ended_reason") or "ended"
            if call_id == self._current:
                self._current = None
                self.say(f"call ended: {reason}")
                if self.once:
                    self._done = True
            else:
                self.say(f"missed call from {agent}: {reason}")
            return
        if state == "ringing":
            if self._current is None and self._ask is None:
                self.say(f"incoming call from {agent} ({call_id})")
                if self.interactive:
                    self._prompt(Ask("ring", call_id), "answer? [Y/n] ")
                else:
                    await self._pick_up(call_id)
            return
        if state != "connected":
            return
        if line.get("answered_by") != self.phone_id:
            if self._ask is not None and self._ask.call_id == call_id:
                await self._drop_ask(call_id)
                self.say(f"call from {agent} answered on another phone")
            return
        turn, expect = line["turn"], line.get("expect")
        if call_id != self._current or not expect or (call_id, turn) in self._asked:
            return
        self._asked.add((call_id, turn))
        self.say(f"{agent}: {line.get('say') or ''}")
        await self._play(line.get("audio_path"))
        if expect == "played":
            await self._event(call_id, "played", turn=turn)
        else:
            await self._ask_answer(call_id, turn)

    async def _ask_answer(self, call_id: str, turn: int) -> None:
        if self.microphone is not None:
            # Played first, then listened to: the recording does not hear the agent.
            await self.microphone.start()
            self._prompt(Ask("answer", call_id, turn), "you (speak, then Enter; or type)> ")
        else:
            self._prompt(Ask("answer", call_id, turn), "you> ")

    async def _pick_up(self, call_id: str) -> None:
        if await self._event(call_id, "answered"):
            self._current = call_id
            self.say("connected")

    async def _answered(self, ask: Ask, text: str | None) -> None:
        if ask.kind == "ring":
            if text is not None and text.strip().lower() in ("", "y", "yes"):
                await self._pick_up(ask.call_id)
            else:
                await self._event(ask.call_id, "declined")
                self.say("declined")
            return
        spoken = b""
        if self.microphone is not None:
            spoken = await self.microphone.stop()
        if ask.call_id != self._current:
            return
        if text is None or text.strip().lower() in HANGUP_WORDS:
            await self._event(ask.call_id, "hangup")
            self._finished.add(ask.call_id)
            self._known.pop(ask.call_id, None)
            self._current = None
            self.say("hung up")
            if self.once:
                self._done = True
            return
        if not text.strip() and self.microphone is not None:
            if not spoken:
                trouble = self.microphone.trouble
                self.say("the microphone recorded nothing" + (f" ({trouble})" if trouble else ""))
                return  # silence: the call hears nothing this turn
            self.say(f"you: (spoken, {_seconds(spoken)})")
            await self._heard(ask, audio=spoken)
            return
        if not text.strip():
            return  # silence: the call hears nothing this turn
        if not self.interactive:
            self.say(f"you: {text}")
        if self.speak is not None:
            await self._heard(ask, audio=await self.speak(text))
        else:
            await self._event(ask.call_id, "heard", turn=ask.turn, text=text)

    async def _heard(self, ask: Ask, *, audio: bytes) -> None:
        """Send the human's answer as sound: the call's speech recognition decides the words."""
        if len(audio) > MAX_PHONE_RECORDING_BYTES:
            # Nothing is cut: the human says it again, shorter, or types it.
            self.say(
                f"that answer is too long to send ({_seconds(audio)}; the local phone sends "
                f"{MAX_PHONE_RECORDING_BYTES:,} bytes of audio, about 21 s): say it shorter, "
                "or type it"
            )
            await self._ask_answer(ask.call_id, ask.turn)
            return
        audio_b64 = base64.b64encode(audio).decode("ascii")
        await self._event(ask.call_id, "heard", turn=ask.turn, audio_b64=audio_b64)

    async def _play(self, path: str | None) -> None:
        if self.player is None or not path:
            return
        proc = await asyncio.create_subprocess_exec(
            *self.player,
            path,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await proc.wait()


def _seconds(wav: bytes) -> str:
    """How long a WAV lasts, for the human; its size when the header cannot say."""
    try:
        with wave.open(io.BytesIO(wav)) as reader:
            return f"{reader.getnframes() / reader.getframerate():.1f} s"
    except (wave.Error, EOFError, ZeroDivisionError):
        return f"{len(wav):,} bytes of audio"
