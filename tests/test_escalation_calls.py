"""A request's call rung through Twilio (the stand-in phone network, the gateway's real
webhooks): the call says what the agent wants and which key answers how, and a key pressed
(Twilio's <Gather>) or a word said (the STT chain) answers it through the gateway, via "call": a
permission's allow or deny, a question's option (or several, keyed then #), a plan's approval.
A request answered elsewhere hangs up its call, ringing or waiting for a key."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, STTConfig, VoiceConfig
from agentcomms.escalation_models import Rung
from tests.fakes.serve import free_port
from tests.fakes.twilio_calls import FakeCall, FakeTwilioCalls, Press
from tests.support.stack import Stack, running_stack
from tests.support.voice import listening, twilio_phone, write_grammar
from tests.support.waiting import eventually

HUMAN = "+15557654321"
# What the human may say on these calls: each one the local recognizer hears exactly.
SAID = ["allow", "deny", "red", "blue", "green"]
COLOURS = [{"label": c, "description": f"the {c} one"} for c in ("red", "blue", "green")]


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio_voice: FakeTwilioCalls
) -> AsyncIterator[Stack]:
    async with _calling_stack(temporal_env, tmp_path, twilio_voice) as s:
        yield s


@pytest.fixture
async def hurried_stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio_voice: FakeTwilioCalls
) -> AsyncIterator[Stack]:
    """A request times out while its call still waits for the human's key."""
    async with _calling_stack(temporal_env, tmp_path, twilio_voice, timeout_s=12) as s:
        yield s


@pytest.fixture
async def impatient_stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio_voice: FakeTwilioCalls
) -> AsyncIterator[Stack]:
    """A call whose human says nothing gives up on them soon."""
    async with _calling_stack(temporal_env, tmp_path, twilio_voice, transcript_timeout_s=8) as s:
        yield s


@contextlib.asynccontextmanager
async def _calling_stack(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    twilio_voice: FakeTwilioCalls,
    *,
    timeout_s: float | None = None,
    transcript_timeout_s: float = 20,
) -> AsyncIterator[Stack]:
    voice = VoiceConfig(
        audio_dir=tmp_path / "audio",
        # Long enough for a request to be answered in the terminal while the call still rings.
        ring_timeout_s=30,
        transcript_timeout_s=transcript_timeout_s,
        phone=twilio_phone(twilio_voice, HUMAN),
        stt=STTConfig(provider="local", grammar=write_grammar(tmp_path / "answers.gram", SAID)),
    )
    port = free_port()

    def configure(cfg: Config) -> Config:
        cfg = listening(cfg, port)
        # Straight to the phone: the ladder's one rung is a call.
        cfg = cfg.model_copy(update={"escalation": [Rung(after_s=0, via="call")]})
        if timeout_s is not None:
            approvals = cfg.approvals.model_copy(update={"timeout_s": timeout_s})
            cfg = cfg.model_copy(update={"approvals": approvals})
        return cfg

    async with running_stack(temporal_env.client, tmp_path, voice=voice, configure=configure) as s:
        yield s


async def _ask(
    stack: Stack, tool_name: str = "Bash", tool_input: dict[str, Any] | None = None
) -> str:
    opened = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id=stack.agent_id("escalation-call"),
        tool_name=tool_name,
        tool_input=tool_input or {"command": "rm -rf build"},
    )
    return str(opened["id"])


async def _ask_colour(stack: Stack, *, several: bool = False) -> str:
    question = {"question": "Which colour?", "header": "Colour", "options": COLOURS}
    return await _ask(
        stack, "AskUserQuestion", {"questions": [{**question, "multiSelect": several}]}
    )


async def _trace(stack: Stack, approval: str) -> dict[str, Any]:
    traced: dict[str, Any] = await stack.call("trace", event_id=approval)
    return traced


def _said_first(stack: Stack, call_detail: str) -> str:
    """The call's first words, from its transcript (its audio is what Twilio played)."""
    call_id = call_detail.split()[1]
    path = stack.cfg.voice.audio_root() / call_id / "transcript.jsonl"
    turns = [json.loads(line) for line in path.read_text().splitlines()]
    return str(next(t["text"] for t in turns if t["speaker"] == "agent"))


async def _decided(stack: Stack, approval: str) -> dict[str, Any]:
    async def decided() -> dict[str, Any] | None:
        waited: dict[str, Any] = await stack.call("approval_wait", id=approval, wait_s=5)
        return waited if waited["status"] == "decided" else None

    return await eventually(decided, timeout=60)


async def _ended(twilio_voice: FakeTwilioCalls) -> FakeCall:
    async def ended() -> FakeCall | None:
        calls = list(twilio_voice.calls.values())
        return calls[0] if len(calls) == 1 and calls[0].done.is_set() else None

    return await eventually(ended, timeout=60)


async def test_pressing_2_denies_the_request(stack: Stack, twilio_voice: FakeTwilioCalls) -> None:
    twilio_voice.answers = [Press("2")]
    approval = await _ask(stack)
    waited = await _decided(stack, approval)
    assert (waited["behavior"], waited["decided_via"], waited["decided_by"]) == (
        "deny",
        "call",
        HUMAN,
    )
    assert waited["decision"]["behavior"] == "deny"
    call = await _ended(twilio_voice)
    assert call.to == HUMAN
    assert '<Gather input="dtmf" numDigits="1"' in call.twiml[0]
    assert twilio_voice.problems == []
    traced = await _trace(stack, approval)
    assert [s["step"] for s in traced["steps"]] == ["opened", "rung 1: call", "answer"]
    assert traced["status"] == f"denied by {HUMAN} on a phone call"
    rung = traced["steps"][1]["detail"]
    assert _said_first(stack, rung).endswith(
        "asks to run: rm -rf build. Press 1 to allow, 2 to deny, 3 to hear it again."
    )


async def test_3_says_it_again_and_1_allows(stack: Stack, twilio_voice: FakeTwilioCalls) -> None:
    twilio_voice.answers = [Press("3"), Press("1")]
    approval = await _ask(stack)
    waited = await _decided(stack, approval)
    assert (waited["behavior"], waited["decided_via"]) == ("allow", "call")
    call = await _ended(twilio_voice)
    # The request was played twice (its words as audio, or said), each time with the keys.
    assert sum("<Gather" in doc for doc in call.twiml) == 2


async def test_the_spoken_answer_is_heard(stack: Stack, twilio_voice: FakeTwilioCalls) -> None:
    twilio_voice.answers = ["deny"]
    approval = await _ask(stack)
    waited = await _decided(stack, approval)
    assert (waited["behavior"], waited["decided_via"]) == ("deny", "call")


async def test_a_forged_key_press_is_refused(stack: Stack, twilio_voice: FakeTwilioCalls) -> None:
    import httpx

    url = f"{stack.cfg.server.public_url}/voice/twilio/c_X/digits?turn=1"
    async with httpx.AsyncClient() as client:
        response = await client.post(
            url, data={"Digits": "1", "AccountSid": twilio_voice.account_sid}
        )
    assert response.status_code == 403


async def test_a_question_reads_its_options_and_a_key_chooses_one(
    stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    twilio_voice.answers = [Press("9"), Press("2")]  # hear it again, then blue
    approval = await _ask_colour(stack)
    waited = await _decided(stack, approval)
    assert (waited["behavior"], waited["answer"], waited["decided_via"]) == (
        "answer",
        "blue",
        "call",
    )
    assert waited["decision"] == {"behavior": "allow", "answer": "blue"}
    call = await _ended(twilio_voice)
    assert sum("<Gather" in doc for doc in call.twiml) == 2
    rung = (await _trace(stack, approval))["steps"][1]["detail"]
    assert _said_first(stack, rung).endswith(
        "asks: Which colour? Press 1 for red, 2 for blue, 3 for green, or say your answer. "
        "9 to hear it again."
    )


async def test_a_spoken_option_answers_the_question(
    stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    twilio_voice.answers = ["green"]  # recorded, and heard by the STT chain
    approval = await _ask_colour(stack)
    waited = await _decided(stack, approval)
    assert (waited["answer"], waited["decided_via"]) == ("green", "call")


async def test_several_options_keyed_then_pound(
    stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    twilio_voice.answers = [Press("31")]
    approval = await _ask_colour(stack, several=True)
    waited = await _decided(stack, approval)
    assert waited["answer"] == "red, green"
    call = await _ended(twilio_voice)
    assert '<Gather input="dtmf" finishOnKey="#"' in call.twiml[0]
    rung = (await _trace(stack, approval))["steps"][1]["detail"]
    assert "Press the numbers of your choices, then the pound key: 1 for red" in _said_first(
        stack, rung
    )


async def test_a_plan_is_approved_with_1(stack: Stack, twilio_voice: FakeTwilioCalls) -> None:
    twilio_voice.answers = [Press("1")]
    approval = await _ask(stack, "ExitPlanMode", {"plan": "Build it, then ship it."})
    waited = await _decided(stack, approval)
    assert (waited["behavior"], waited["decided_via"]) == ("allow", "call")
    assert waited["decision"] == {"behavior": "allow"}
    traced = await _trace(stack, approval)
    assert traced["status"] == f"approved by {HUMAN} on a phone call"
    assert _said_first(stack, traced["steps"][1]["detail"]).endswith(
        "asks to carry out its plan: Build it, then ship it. Press 1 to approve, 2 to keep "
        "planning, 3 to hear it again."
    )


async def _rung_detail(stack: Stack, approval: str, ends_with: str) -> str:
    async def ended() -> str | None:
        rungs = (await _trace(stack, approval))["rungs"]
        detail = str(rungs[0]["detail"]) if rungs else ""
        return detail if detail.endswith(ends_with) else None

    return await eventually(ended, timeout=60)


async def test_answered_in_the_terminal_while_the_call_rings(
    stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    twilio_voice.scenario = "no-answer"  # it rings until its timeout, 30 s
    approval = await _ask(stack)

    async def ringing() -> FakeCall | None:
        return next((c for c in twilio_voice.calls.values() if c.status == "ringing"), None)

    call = await eventually(ringing, timeout=60)
    await stack.call("approval_decide", id=approval, behavior="deny")
    await _rung_detail(
        stack,
        approval,
        "; the call ended (canceled): the request was answered elsewhere before the call was taken",
    )
    await asyncio.wait_for(call.done.wait(), 60)
    assert call.ended_by_update == "canceled"
    assert call.statuses[-1] == "canceled"  # well before its 30 s were up
    assert twilio_voice.problems == []


async def test_answered_in_the_terminal_while_the_call_waits_for_a_key(
    stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    twilio_voice.answers = []  # the human picks up and says nothing
    approval = await _ask(stack)

    async def holding() -> FakeCall | None:
        calls = list(twilio_voice.calls.values())
        return calls[0] if calls and calls[0].twiml else None

    call = await eventually(holding, timeout=60)
    await stack.call("approval_decide", id=approval, behavior="allow")
    await _rung_detail(
        stack, approval, "; the call ended (completed): the request was answered elsewhere"
    )
    await asyncio.wait_for(call.done.wait(), 60)
    assert call.ended_by_update == "completed"
    # The call said why before hanging up: the goodbye is the last words it played.
    assert len(call.played) >= 2


async def test_a_request_that_times_out_while_the_call_waits_for_a_key_says_so(
    hurried_stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    twilio_voice.answers = []  # the human picks up and says nothing
    approval = await _ask(hurried_stack)
    detail = await _rung_detail(
        hurried_stack, approval, "; the call ended (completed): the request timed out"
    )
    call_id = detail.split()[1]
    path = hurried_stack.cfg.voice.audio_root() / call_id / "transcript.jsonl"
    turns = [json.loads(line) for line in path.read_text().splitlines()]
    said = [t["text"] for t in turns if t["speaker"] == "agent"]
    assert (
        said[-1] == "Nobody answered that request in time, so it no longer waits for you. Goodbye."
    )
    assert not any("answered elsewhere" in words for words in said)


async def _ask_at_once(stack: Stack) -> tuple[str, str]:
    """Two agents' requests opened at the same moment, each with its ladder's call rung due."""

    async def ask(agent: str, command: str) -> str:
        opened = await stack.call(
            "approval_open", kind="claude-code", agent_id=stack.agent_id(agent),
            tool_name="Bash", tool_input={"command": command},
        )  # fmt: skip
        return str(opened["id"])

    first, second = await asyncio.gather(
        ask("escalation-call", "make deploy"), ask("escalation-other", "rm -rf build")
    )
    return first, second


async def _rung_details(stack: Stack, approvals: tuple[str, str]) -> list[str]:
    return [str((await _trace(stack, a))["rungs"][0]["detail"]) for a in approvals]


async def test_two_requests_escalating_at_once_ring_the_phone_once_and_both_are_answered(
    stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    twilio_voice.answers = [Press("1"), Press("2")]
    approvals = await _ask_at_once(stack)

    decided = [await _decided(stack, a) for a in approvals]
    assert sorted(d["behavior"] for d in decided) == ["allow", "deny"]
    assert {d["decided_via"] for d in decided} == {"call"}
    (call,) = twilio_voice.calls.values()  # the other request joined the call in progress
    await asyncio.wait_for(call.done.wait(), 60)
    assert len(twilio_voice.calls) == 1
    details = await _rung_details(stack, approvals)
    carrying = next(d.split()[1] for d in details if d.startswith("call c_"))
    assert f"not fired: answered while the human's phone was on call {carrying}" in details
    path = stack.cfg.voice.audio_root() / carrying / "transcript.jsonl"
    said = [json.loads(line)["text"] for line in path.read_text().splitlines()]
    assert any(s.startswith("Done: allowed. Next, ") for s in said), said


async def test_a_request_that_waited_for_the_phone_gets_its_own_call_when_that_one_heard_nothing(
    impatient_stack: Stack, twilio_voice: FakeTwilioCalls
) -> None:
    stack = impatient_stack
    twilio_voice.answers = []  # the first call is picked up, and nothing said
    approvals = await _ask_at_once(stack)

    (first,) = await eventually(lambda: list(twilio_voice.calls.values()) or None, timeout=60)
    # Nothing heard in its turn (8 s), the call ends and frees the phone, not at its longest.
    await asyncio.wait_for(first.done.wait(), 60)
    # Only a call placed after the first one ended hears these: one placed beside it would
    # have been hung up on too, and nothing answered.
    twilio_voice.answers = [Press("1"), Press("1")]

    decided = [await _decided(stack, a) for a in approvals]
    assert [(d["behavior"], d["decided_via"]) for d in decided] == [("allow", "call")] * 2
    assert len(twilio_voice.calls) == 2
    details = await _rung_details(stack, approvals)
    (waited,) = [d for d in details if "had ended)" in d]
    (silent,) = [d.split()[1] for d in details if d is not waited]
    assert f"(once call {silent} had ended)" in waited
    path = stack.cfg.voice.audio_root() / silent / "transcript.jsonl"
    said = [json.loads(line)["text"] for line in path.read_text().splitlines()]
    assert said[-1] == "No answer was heard. Goodbye.", said
