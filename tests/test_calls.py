"""Phone calls on the local phone, against a real gateway, worker and Temporal dev server.

The phone here is the gateway's own phone protocol (`phone_wait`, `phone_event`), spoken by a
small helper, so each test decides exactly what the human does and when; `test_phone_process.py`
runs the real `agentcomms phone`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import FastMCPTransport
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import VoiceConfig
from agentcomms.errors import GatewayError
from mcp_server import build_server
from tests.support.cli import AGENTCOMMS
from tests.support.home import write_config
from tests.support.phone import Phone
from tests.support.stack import STACK_KEY, Stack, register_recorder, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually


def mcp(stack: Stack, agent: str) -> Client[FastMCPTransport]:
    return Client(build_server(stack.cfg.server.socket(), default_agent=agent))


async def tool(client: Client[FastMCPTransport], name: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    assert result.structured_content is not None
    return result.structured_content


def transcript(stack: Stack, call_id: str) -> list[tuple[str, str]]:
    path = stack.cfg.voice.audio_root() / call_id / "transcript.jsonl"
    return [(t["speaker"], t["text"]) for t in map(json.loads, path.read_text().splitlines())]


async def test_a_call_of_several_turns_through_the_tools(stack: Stack) -> None:
    agent = stack.agent_id("backend")
    phone = Phone(stack)
    async with mcp(stack, agent) as client:
        first = asyncio.create_task(tool(client, "initiate_call", message="Deploy 0042 now?"))
        call_id = await phone.answer()
        line = await phone.reply(call_id, "yes go ahead")
        # The phone was told the words and where their sound is (espeak-ng made it).
        assert line["say"] == "Deploy 0042 now?" and line["audio"]["provider"] == "local"
        with open(line["audio_path"], "rb") as sound:  # noqa: ASYNC230
            assert sound.read(4) == b"RIFF"
        assert line["audio"]["duration_s"] > 0.5
        assert await first == {
            "call_id": call_id,
            "response": "yes go ahead",
            "status": "answered",
            "timed_out": False,
            "note": None,
        }
        active = await tool(client, "list_active_calls")
        assert [c["call_id"] for c in active["calls"]] == [call_id]

        second = asyncio.create_task(
            tool(client, "continue_call", call_id=call_id, message="Migrate staging too?")
        )
        await phone.reply(call_id, "no, only production")
        assert (await second)["response"] == "no, only production"

        spoken = asyncio.create_task(
            tool(client, "speak_to_user", call_id=call_id, message="Starting now.")
        )
        played = await phone.prompt(call_id, "played")
        assert played["say"] == "Starting now."
        await phone.event(call_id, "played", turn=played["turn"])
        assert await spoken == {"success": True}

        await asyncio.sleep(0.3)  # the call lasts a moment
        ending = asyncio.create_task(
            tool(client, "end_call", call_id=call_id, message="Done, goodbye.")
        )
        goodbye = await phone.prompt(call_id, "played")
        await phone.event(call_id, "played", turn=goodbye["turn"])
        ended = await ending
        assert ended["status"] == "completed" and ended["duration_seconds"] >= 0.3
        assert (await phone.until(lambda line: line["state"] == "ended"))["call_id"] == call_id

        # Over: the call is gone from the active list, its record and transcript stay.
        row = await eventually(lambda: _final_row(stack, call_id), timeout=10)
        assert row["duration_seconds"] == ended["duration_seconds"]
        assert (await tool(client, "list_active_calls"))["calls"] == []
        error = await client.call_tool(
            "continue_call", {"call_id": call_id, "message": "still there?"}, raise_on_error=False
        )
        assert error.is_error and "ended" in error.content[0].text
    assert transcript(stack, call_id) == [
        ("agent", "Deploy 0042 now?"),
        ("human", "yes go ahead"),
        ("agent", "Migrate staging too?"),
        ("human", "no, only production"),
        ("agent", "Starting now."),
        ("agent", "Done, goodbye."),
    ]


async def _final_row(stack: Stack, call_id: str) -> dict[str, Any] | None:
    rows = (await stack.call("calls"))["calls"]
    row = next(r for r in rows if r["id"] == call_id)
    return row if row["status"] == "completed" else None


async def test_another_agent_cannot_take_over_a_call(stack: Stack) -> None:
    phone = Phone(stack)
    owner = stack.agent_id("owner")
    first = asyncio.create_task(stack.call("call", agent_id=owner, message="Hello?"))
    call_id = await phone.answer()
    await phone.reply(call_id, "hi")
    await first
    with pytest.raises(GatewayError, match="no call"):
        await stack.call("call_say", call_id=call_id, message="me too", agent_id="intruder")
    await stack.call("call_end", call_id=call_id, agent_id=owner)


async def test_a_silent_human_times_the_turn_out_with_what_was_heard_so_far(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    voice = VoiceConfig(audio_dir=tmp_path / "audio", transcript_timeout_s=1.0)
    async with running_stack(temporal_env.client, tmp_path, voice=voice) as stack:
        phone = Phone(stack)
        first = asyncio.create_task(stack.call("call", agent_id="a", message="Ready?"))
        call_id = await phone.answer()
        await phone.prompt(call_id)  # ... and the human says nothing
        result = await first
        assert result["status"] == "timed-out" and result["timed_out"] is True
        assert result["response"] == "" and "nothing was heard" in result["note"]

        second = asyncio.create_task(
            stack.call("call_say", call_id=call_id, message="Still there?")
        )
        line = await phone.prompt(call_id)
        await phone.event(call_id, "partial", turn=line["turn"], text="well I think")
        result = await second
        assert result["timed_out"] is True and result["response"] == "well I think"
        assert "heard so far" in result["note"]
        ended = await stack.call("call_end", call_id=call_id)
        assert ended["duration_seconds"] > 2


async def test_nobody_answers_and_the_message_reaches_the_inbox(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    voice = VoiceConfig(audio_dir=tmp_path / "audio", ring_timeout_s=0.5)
    async with running_stack(temporal_env.client, tmp_path, voice=voice) as stack:
        result = await stack.call("call", agent_id="a", message="The build is red.")
        assert result["status"] == "no-answer" and result["success"] is False
        assert "inbox" in result["note"]
        inbox = (await stack.call("inbox"))["messages"]
        assert [m["payload"]["text"] for m in inbox] == [
            "I tried calling but couldn't reach you. Here's my message: The build is red."
        ]
        with pytest.raises(GatewayError, match="has ended"):
            await stack.call("call_say", call_id=result["call_id"], message="hello?")


async def test_a_declined_call_says_so(stack: Stack) -> None:
    phone = Phone(stack)
    first = asyncio.create_task(stack.call("call", agent_id="a", message="Quick question"))
    call_id = await phone.ringing()
    await phone.event(call_id, "declined")
    result = await first
    assert result["status"] == "declined" and "declined" in result["note"]


async def test_a_retried_request_places_one_call(stack: Stack) -> None:
    phone = Phone(stack)
    params = {"agent_id": "a", "message": "One call only", "request_id": "req-1"}
    first = asyncio.create_task(stack.call("call", **params))
    call_id = await phone.answer()
    await phone.reply(call_id, "sure")
    again = await stack.call("call", **params)  # e.g. a client retrying after a lost reply
    assert again == await first
    assert [c["id"] for c in (await stack.call("calls"))["calls"]] == [call_id]
    await stack.call("call_end", call_id=call_id)


async def test_non_blocking_the_answer_arrives_in_the_mailbox(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id("nb")
    out = await register_recorder(stack, tmux, tmp_path, agent)
    phone = Phone(stack)
    async with mcp(stack, agent) as client:
        started = await tool(client, "initiate_call", message="Which branch?", wait=False)
        call_id = started["call_id"]
        assert started["status"] == "ringing" and started["response"] == ""
        await phone.answer()
        await phone.reply(call_id, "main")
        got = await tool(client, "wait_for_messages", timeout_s=20)
        [message] = got["messages"]
        assert message["text"] == f"[phone call {call_id}] main"
        assert message["provider"] == "phone" and message["chat_id"] == call_id
        # Typed into the agent's pane too.
        await eventually(lambda: f"[phone call {call_id}] main".encode() in out.read_bytes())
        # The call stays up for the agent to carry on.
        follow = asyncio.create_task(
            tool(client, "continue_call", call_id=call_id, message="Tag it?")
        )
        await phone.reply(call_id, "yes")
        assert (await follow)["response"] == "yes"
        assert (await tool(client, "end_call", call_id=call_id))["status"] == "completed"


def _worker_home(tmp_path: Path, stack: Stack) -> Path:
    home = tmp_path / "worker-home"
    write_config(
        home,
        {
            "temporal": {
                "address": stack.cfg.temporal.address,
                "task_queue": stack.cfg.temporal.task_queue,
            },
            "database": {"url": stack.cfg.database.url},
            "server": {"socket_path": str(home / "unused.sock")},
            "voice": {"audio_dir": str(stack.cfg.voice.audio_root())},
            "security": {"deployment_key": STACK_KEY},  # one deployment with the test's gateway
        },
    )
    return home


def _start_worker(home: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCOMMS_")}
    env["AGENTCOMMS_HOME"] = str(home)
    return subprocess.Popen(
        [AGENTCOMMS, "worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


@pytest.mark.timeout(120)
async def test_a_worker_killed_between_two_turns_and_the_call_goes_on(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as stack:
        home = _worker_home(tmp_path, stack)
        worker = _start_worker(home)
        replacement = None
        try:
            phone = Phone(stack)
            first = asyncio.create_task(stack.call("call", agent_id="a", message="Turn one?"))
            call_id = await phone.answer()
            await phone.reply(call_id, "one")
            assert (await first)["response"] == "one"

            worker.send_signal(signal.SIGKILL)
            worker.wait()
            # The agent asks while no worker runs: the turn waits for one.
            second = asyncio.create_task(
                stack.call("call_say", call_id=call_id, message="Turn two?")
            )
            await asyncio.sleep(1)
            assert not second.done()
            replacement = _start_worker(home)
            await phone.reply(call_id, "two")
            assert (await second)["response"] == "two"
            ended = await stack.call("call_end", call_id=call_id)
        finally:
            for proc in (worker, replacement):
                if proc and proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert ended["status"] == "completed"
        assert [t for t in transcript(stack, call_id) if t[0] == "human"] == [
            ("human", "one"),
            ("human", "two"),
        ]


async def test_nobody_answers_and_the_message_goes_out_by_sms(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    from pydantic import SecretStr

    from agentcomms.config import Config, PhoneConfig
    from tests.fakes.twilio import OUR_NUMBER, FakeTwilio

    human = "+15551230000"
    twilio = FakeTwilio()
    await twilio.server.start()

    def with_sms(cfg: Config) -> Config:
        sms = cfg.chat.sms.model_copy(
            update={
                "enabled": True,
                "account_sid": twilio.account_sid,
                "auth_token": SecretStr(twilio.auth_token),
                "from_number": OUR_NUMBER,
                "base_url": twilio.base_url,
            }
        )
        return cfg.model_copy(update={"chat": cfg.chat.model_copy(update={"sms": sms})})

    voice = VoiceConfig(
        audio_dir=tmp_path / "audio",
        ring_timeout_s=0.5,
        phone=PhoneConfig(provider="local", to_number=human),
    )
    try:
        async with running_stack(
            temporal_env.client, tmp_path, voice=voice, configure=with_sms
        ) as stack:
            result = await stack.call("call", agent_id="a", message="Prod is down.")
            assert result["status"] == "no-answer"
            assert result["note"] == (
                f"no answer within 0.5 s; the message was sent by SMS to {human} instead"
            )
            assert twilio.bodies_to(human) == [
                "I tried calling but couldn't reach you. Here's my message: Prod is down."
            ]
            assert (await stack.call("inbox"))["messages"] == []
    finally:
        await twilio.server.stop()
