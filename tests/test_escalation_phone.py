"""The local phone and requests: a ladder's call (the phone's protocol spoken one step at a time),
where a digit (or an option's label) typed at its prompt answers the request; and `agentcomms
phone --dial` (the real process), which calls in as the human would call the Twilio number,
whose call goes on across a gateway restarted between two of its steps, and whose call ends when
its input ends or Ctrl-C abandons it mid-menu."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, VoiceConfig
from agentcomms.escalation_models import Rung
from tests.support.cli import AGENTCOMMS, as_in_a_terminal
from tests.support.home import write_config
from tests.support.hooks import listed_approval, open_approval, open_question
from tests.support.phone import Phone
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually


def calls_at_once(cfg: Config) -> Config:
    """The ladder's one rung: a call, at once."""
    return cfg.model_copy(update={"escalation": [Rung(after_s=0, via="call")]})


@pytest.fixture
async def calling_stack(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Stack]:
    """A stack whose requests ring the local phone at once (its sounds in the test's folder)."""
    voice = VoiceConfig(audio_dir=tmp_path / "audio")
    async with running_stack(
        temporal_env.client, tmp_path, voice=voice, configure=calls_at_once
    ) as s:
        yield s


async def test_a_digit_typed_at_the_local_phone_decides(calling_stack: Stack) -> None:
    stack = calling_stack
    agent = stack.agent_id("backend")
    approval = await open_approval(stack, agent, command="rm -rf build", session=False)
    phone = Phone(stack)
    call_id = await phone.answer()
    asked = await phone.prompt(call_id)
    assert asked["say"] == (
        f"{agent} asks to run: rm -rf build. Press 1 to allow, 2 to deny, 3 to hear it again."
    )
    assert asked["approval_id"] == approval
    await phone.event(call_id, "heard", turn=asked["turn"], text="3")
    again = await phone.until(
        lambda line: line["expect"] == "answer" and line["turn"] > asked["turn"]
    )
    assert again["say"] == asked["say"]
    await phone.event(call_id, "heard", turn=again["turn"], text="1")

    async def decided() -> dict[str, Any] | None:
        waited: dict[str, Any] = await stack.call("approval_wait", id=approval, wait_s=5)
        return waited if waited["status"] == "decided" else None

    waited = await eventually(decided, timeout=30)
    assert (waited["behavior"], waited["decided_via"]) == ("allow", "call")
    assert waited["decided_by"] == "the local phone"
    # The call says how it was decided, then hangs up.
    goodbye = await phone.until(lambda line: line["expect"] == "played")
    assert goodbye["say"] == "Done: allowed. Goodbye."


async def test_a_question_on_the_local_phone(calling_stack: Stack) -> None:
    stack = calling_stack
    agent = stack.agent_id("phone-question")
    approval = await open_question(
        stack, agent, ["red", "blue"], question="Which colour?", several=False
    )
    phone = Phone(stack)
    call_id = await phone.answer()
    asked = await phone.prompt(call_id)
    assert asked["say"] == (
        f"{agent} asks: Which colour? Press 1 for red, 2 for blue, or say your answer. "
        "9 to hear it again."
    )
    await phone.event(call_id, "heard", turn=asked["turn"], text="purple")  # not an option
    again = await phone.until(
        lambda line: line["expect"] == "answer" and line["turn"] > asked["turn"]
    )
    await phone.event(call_id, "heard", turn=again["turn"], text="Blue")
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert (waited["answer"], waited["decided_via"]) == ("blue", "call")
    goodbye = await phone.until(lambda line: line["expect"] == "played")
    assert goodbye["say"] == "Done: answered 'blue'. Goodbye."


async def _dialling(stack: Stack, tmp_path: Path) -> asyncio.subprocess.Process:
    """`agentcomms phone --dial`, started: its input and output pipes."""
    home = tmp_path / "phone-home"
    write_config(home, {"server": {"socket_path": str(stack.cfg.server.socket())}})
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCOMMS_")}
    env["AGENTCOMMS_HOME"] = str(home)
    return await asyncio.create_subprocess_exec(
        AGENTCOMMS,
        "phone",
        "--dial",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        preexec_fn=as_in_a_terminal,  # a test ends one with Ctrl-C
    )


async def _dial(stack: Stack, tmp_path: Path, typed: str) -> str:
    """`agentcomms phone --dial` with `typed` as its input; what it showed."""
    proc = await _dialling(stack, tmp_path)
    out, _ = await asyncio.wait_for(proc.communicate(typed.encode()), 60)
    assert proc.returncode == 0, out.decode()
    return out.decode()


async def _dialled_in(stack: Stack) -> dict[str, Any]:
    """The local phone's call in, as `agentcomms calls` lists it."""
    calls = (await stack.call("calls"))["calls"]
    [call] = [c for c in calls if c["direction"] == "in"]
    assert call["phone_number"] == "the local phone"
    return dict(call)


async def test_dialling_in_from_the_local_phone(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    agent = f"backend-{uuid.uuid4().hex[:8]}"

    def configure(cfg: Config) -> Config:
        chat = cfg.chat.model_copy(update={"channels": {"telegram:42": agent}})
        return cfg.model_copy(update={"chat": chat})

    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        approval = await open_approval(stack, agent, command="rm -rf build", session=False)
        await listed_approval(stack, approval)
        shown = await _dial(stack, tmp_path, "1\n2\n3\n1\nship it on friday\n")
        assert f"{agent} asks to run: rm -rf build. Press 1 to allow, 2 to deny" in shown
        assert "Done: denied. No more requests." in shown
        assert f"Your message for {agent} was sent." in shown
        assert shown.rstrip().endswith("hung up")  # the input ended
        call = await _dialled_in(stack)  # and with it the call, not left in progress
        assert call["status"] == "completed" and call["ended_at"] is not None
        assert await stack.store.caller(call["id"]) is None
        waited = await stack.call("approval_wait", id=approval, wait_s=5)
        assert (waited["behavior"], waited["decided_via"]) == ("deny", "call")

        async def posted() -> Any:
            rows = await stack.store.latest_events(agent, 10)
            return next((e for e in rows if e.channel_id.startswith("phone:")), None)

        message = await eventually(posted)
        assert message.text == "[phone call from the local phone] ship it on friday"


async def test_an_urgent_reply_rings_the_local_phone(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path, configure=calls_at_once) as stack:
        agent = stack.agent_id("backend")
        sent = await stack.call(
            "reply", channel_id="cli:local", message="Prod is down.", agent_id=agent, urgent=True
        )
        assert sent["escalation"] == f"escalation-{agent}"
        phone = Phone(stack)
        line = await phone.until(lambda line: line["state"] == "ringing")
        assert line["say"] == f"{agent} says: Prod is down."
        assert line["approval_id"] is None

        async def rung_in_trace() -> list[str] | None:
            traced = await stack.call("trace", event_id=sent["event_id"])
            steps = [s["step"] for s in traced["steps"]]
            return steps if "rung 1: call" in steps else None

        await eventually(rung_in_trace)
        await phone.event(line["call_id"], "declined")


async def test_a_call_coming_in_goes_on_across_a_gateway_restart(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path) as stack:
        agent = stack.agent_id("dial-restart")
        approval = await open_approval(stack, agent, command="make deploy", session=False)
        await listed_approval(stack, approval)
        dialled = await stack.call("phone_dial")
        assert "1 request waiting for you" in dialled["words"]
        offered = await stack.call(
            "phone_dial_answer", call=dialled["call"], step=dialled["step"], text="1"
        )
        assert f"{agent} asks to run: make deploy." in offered["words"]
        await stack.restart_gateway()  # as `agentcomms up` stopping and starting, mid-call
        after = await stack.call(
            "phone_dial_answer",
            call=dialled["call"],
            step=offered["step"],
            query=offered["query"],
            text="1",
        )
        assert after["words"].startswith("Done: allowed. No more requests.")
        waited = await stack.call("approval_wait", id=approval, wait_s=5)
        assert (waited["behavior"], waited["decided_via"]) == ("allow", "call")


async def test_a_dial_abandoned_with_ctrl_c_ends_its_call(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path) as stack:
        proc = await _dialling(stack, tmp_path)
        assert proc.stdout is not None
        shown = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert b"3 to leave a message for an agent." in shown  # the menu, waiting for a key
        assert (await _dialled_in(stack))["status"] == "in-progress"
        proc.send_signal(signal.SIGINT)
        out = (await asyncio.wait_for(proc.stdout.read(), 60)).decode()
        assert await proc.wait() == 0 and "Traceback" not in out, out
        assert out.strip() == "hung up"
        call = await _dialled_in(stack)
        assert call["status"] == "completed" and call["ended_at"] is not None
        assert await stack.store.caller(call["id"]) is None
