"""The real `agentcomms phone` and `agentcomms mcp` processes on a call: the agent drives it with
the official MCP client over stdio, the human is a script piped into the phone.

The gateway and worker run in the test (real Temporal dev server). With `--speak` the phone says
each answer with espeak-ng and sends the sound, so the call's own speech recognition
(pocketsphinx, with a small grammar) decides what the human said.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import wave
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.client import GatewayClient
from agentcomms.config import STTConfig, VoiceConfig
from tests.support.cli import AGENTCOMMS
from tests.support.home import write_config
from tests.support.mcp import make_home, stdio_session, tool
from tests.support.stack import Stack, running_stack
from tests.support.voice import write_grammar
from tests.support.waiting import eventually


class PhoneProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.shown: list[str] = []

    def type(self, *lines: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(f"{line}\n" for line in lines).encode())

    def hang_up_the_script(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    async def until_shown(self, text: str, timeout: float = 20) -> None:
        assert self.proc.stdout is not None
        async with asyncio.timeout(timeout):
            while not any(text in line for line in self.shown):
                line = await self.proc.stdout.readline()
                if not line:
                    raise AssertionError(f"the phone exited without showing {text!r}: {self.shown}")
                self.shown.append(line.decode().rstrip("\n"))


@asynccontextmanager
async def phone_process(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[PhoneProcess]:
    env = {k: v for k, v in (env or os.environ).items() if not k.startswith("AGENTCOMMS_")}
    env["AGENTCOMMS_HOME"] = str(home)
    proc = await asyncio.create_subprocess_exec(
        AGENTCOMMS,
        "phone",
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    phone = PhoneProcess(proc)
    try:
        yield phone
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


@pytest.fixture
async def spoken_stack(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Stack]:
    grammar = write_grammar(tmp_path / "answers.gram")
    voice = VoiceConfig(
        audio_dir=tmp_path / "audio",
        stt=STTConfig(provider="local", grammar=grammar),
    )
    async with running_stack(temporal_env.client, tmp_path, voice=voice) as stack:
        yield stack


def phone_home(tmp_path: Path, stack: Stack) -> Path:
    home = tmp_path / "phone-home"
    write_config(home, {"server": {"socket_path": str(stack.cfg.server.socket())}})
    return home


@pytest.mark.timeout(90)
async def test_a_spoken_call_end_to_end_through_the_official_mcp_client(
    spoken_stack: Stack, tmp_path: Path
) -> None:
    stack = spoken_stack
    mcp_home = make_home(tmp_path, stack.cfg.server.socket())
    async with (
        phone_process(phone_home(tmp_path, stack), "--speak", "--once") as phone,
        stdio_session(mcp_home, tmp_path / "mcp.err", agent="backend") as session,
    ):
        phone.type("yes go ahead", "no wait")
        first = await tool(session, "initiate_call", message="Shall I deploy release 42?")
        # espeak-ng said it, pocketsphinx heard it: exactly, within the grammar.
        assert first["response"] == "yes go ahead" and first["status"] == "answered"
        call_id = first["call_id"]
        await phone.until_shown("backend: Shall I deploy release 42?")

        second = await tool(session, "continue_call", call_id=call_id, message="Now?")
        assert second["response"] == "no wait"
        third = await tool(session, "speak_to_user", call_id=call_id, message="Holding.")
        assert third == {"success": True}
        await asyncio.sleep(0.2)
        ended = await tool(session, "end_call", call_id=call_id, message="Bye for now.")
        assert ended["status"] == "completed" and ended["duration_seconds"] > 0.2
        await phone.until_shown("call ended: the agent ended the call")
        assert await asyncio.wait_for(phone.proc.wait(), 10) == 0  # --once
    shown = "\n".join(phone.shown)
    for words in ("incoming call from backend", "backend: Now?", "backend: Holding.",
                  "backend: Bye for now.", "you: yes go ahead"):  # fmt: skip
        assert words in shown
    recording = stack.cfg.voice.audio_root() / call_id / "001-human.wav"
    assert recording.read_bytes()[:4] == b"RIFF"


# The microphone, as the phone's recorder sees it: sox's `rec` first on the PATH "hears" a WAV
# espeak-ng made, until the phone interrupts it, as it interrupts the real one when Enter is
# pressed. It notes each start, with its arguments, so the test speaks only once it listens.
FAKE_REC = """#!/bin/sh
for last; do :; done
cp "$MIC_WAV" "$last"
echo "$@" >> "$MIC_LOG"
trap 'exit 0' INT
while :; do sleep 0.05; done
"""


def microphone_env(tmp_path: Path, wav: bytes) -> dict[str, str]:
    """The environment of a phone whose microphone hears `wav` (see FAKE_REC)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rec").write_text(FAKE_REC)
    (bin_dir / "rec").chmod(0o755)
    (tmp_path / "spoken.wav").write_bytes(wav)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "MIC_WAV": str(tmp_path / "spoken.wav"),
        "MIC_LOG": str(tmp_path / "mic.log"),
    }


async def listening(log: Path, times: int) -> None:
    """Until the microphone has been started `times` times."""
    await eventually(lambda: log.exists() and len(log.read_text().splitlines()) >= times)


@pytest.mark.timeout(90)
async def test_an_answer_spoken_into_the_microphone_or_typed(
    spoken_stack: Stack, tmp_path: Path
) -> None:
    from agentcomms.voice.tts.local import EspeakSpeech

    stack = spoken_stack
    wav, _ = await EspeakSpeech().synthesize("call me later")
    env = microphone_env(tmp_path, wav)
    log = tmp_path / "mic.log"
    async with phone_process(phone_home(tmp_path, stack), "--mic", "--once", env=env) as phone:
        first = asyncio.create_task(stack.call("call", agent_id="ops", message="When?"))
        await listening(log, 1)
        phone.type("")  # Enter: the recording is the answer
        answered = await first
        # Heard by the call's own speech recognition, not sent as text.
        assert answered["response"] == "call me later"
        second = asyncio.create_task(
            stack.call("call_say", call_id=answered["call_id"], message="Which day?")
        )
        await listening(log, 2)
        phone.type("ship it on friday")  # typed words win over the recording
        assert (await second)["response"] == "ship it on friday"
        await phone.until_shown("you: ship it on friday")
    assert "you: (spoken," in "\n".join(phone.shown)
    # 16 kHz mono 16-bit, into a WAV file of its own each time.
    starts = log.read_text().splitlines()
    assert all(line.startswith("-q -c 1 -r 16000 -b 16 ") for line in starts)
    assert all(line.endswith(".wav") for line in starts) and len(set(starts)) == 2
    assert not _files_left([line.split()[-1] for line in starts])


@pytest.mark.timeout(60)
async def test_an_answer_too_long_to_send_is_asked_for_again(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    # 25 s of 16 kHz speech (silence will do): more than one socket request may carry.
    long = io.BytesIO()
    with wave.open(long, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(b"\0\0" * 16_000 * 25)
    env = microphone_env(tmp_path, long.getvalue())
    async with running_stack(temporal_env.client, tmp_path) as stack:
        home = phone_home(tmp_path, stack)
        async with phone_process(home, "--mic", "--once", env=env) as phone:
            answer = asyncio.create_task(stack.call("call", agent_id="ops", message="Why?"))
            await listening(tmp_path / "mic.log", 1)
            phone.type("")
            await phone.until_shown("that answer is too long to send (25.0 s;")
            await listening(tmp_path / "mic.log", 2)  # listening again, for the same turn
            phone.type("because")
            assert (await answer)["response"] == "because"


def _files_left(paths: list[str]) -> list[str]:
    return [p for p in paths if Path(p).exists()]


async def test_the_microphone_needs_a_recorder(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "AGENTCOMMS_HOME": str(tmp_path / "home")}
    proc = await asyncio.create_subprocess_exec(
        AGENTCOMMS, "phone", "--mic", env=env, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    assert "--mic needs a recorder: install sox" in " ".join(err.decode().split())


@pytest.mark.timeout(60)
async def test_a_scripted_phone_hangs_up_when_its_input_ends(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path) as stack:
        async with phone_process(phone_home(tmp_path, stack)) as phone:
            phone.type("typed answer")
            phone.hang_up_the_script()
            first = await stack.call("call", agent_id="a", message="First question?")
            assert first["response"] == "typed answer"
            second = await stack.call("call_say", call_id=first["call_id"], message="And?")
            assert second["status"] == "hung-up" and second["success"] is False
            assert "the human hung up" in second["note"]
            await phone.until_shown("hung up")
            assert await asyncio.wait_for(phone.proc.wait(), 10) == 0


@pytest.mark.timeout(60)
async def test_call_and_calls_from_the_command_line(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path) as stack:
        home = phone_home(tmp_path, stack)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCOMMS_")}
        env["AGENTCOMMS_HOME"] = str(home)
        async with phone_process(home, "--once") as phone:
            phone.type("sounds good")
            placed = await asyncio.create_subprocess_exec(
                AGENTCOMMS, "call", "ops", "Rotate the keys tonight?",
                env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, err = await asyncio.wait_for(placed.communicate(), 30)
            assert placed.returncode == 0, err
            assert out.decode().strip() == "sounds good"
            await phone.until_shown("call ended: the agent ended the call")
        listed = await asyncio.create_subprocess_exec(
            AGENTCOMMS, "calls", "--json", env=env, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await listed.communicate()
        [row] = json.loads(out)["calls"]
        assert row["agent_id"] == "ops" and row["phone_number"] == "local"
        assert row["status"] in ("in-progress", "completed")  # its last write may lag a moment


@pytest.mark.timeout(90)
async def test_the_phone_holds_the_line_while_the_gateway_restarts(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    from gateway.service import Gateway

    async with running_stack(temporal_env.client, tmp_path) as stack:
        async with phone_process(phone_home(tmp_path, stack), "--once") as phone:
            phone.type("before", "after")
            first = await stack.call("call", agent_id="a", message="Restart test?")
            assert first["response"] == "before"
            await stack.rpc.close()
            await stack.gateway.close()  # as `agentcomms up` stopping, mid-call
            await asyncio.sleep(1)
            stack.gateway = Gateway(stack.cfg, stack.client, stack.store, host=stack.host)
            await stack.gateway.start()
            async with GatewayClient(stack.cfg.server.socket()) as rpc:
                second = await rpc.call("call_say", call_id=first["call_id"], message="Still on?")
                assert second["response"] == "after"
                await rpc.call("call_end", call_id=first["call_id"])
            await phone.until_shown("call ended")
            assert "gateway unreachable" in "\n".join(phone.shown)
        await stack.gateway.close()


async def test_a_microphone_that_cannot_record_says_why(tmp_path: Path) -> None:
    from agentcomms.voice.callsystem.local import Microphone

    broken = tmp_path / "rec"
    broken.write_text(
        '#!/bin/sh\necho "ALSA lib: noise" >&2\necho "rec FAIL sox: no device" >&2\nexit 2\n'
    )
    broken.chmod(0o755)
    microphone = Microphone([str(broken)])
    await microphone.start()
    await asyncio.sleep(1)  # a human speaks a moment before pressing Enter
    assert await microphone.stop() == b""
    assert microphone.trouble == "rec FAIL sox: no device"
