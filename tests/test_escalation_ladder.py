"""A permission request's escalation ladder on the time-skipping test server: each rung fires only
while nobody has answered (chat, then an SMS through the Twilio stand-in, then a call), an answer
anywhere stops it, quiet hours hold the rungs past the first, and a ladder the deployment did not
sign reaches nobody."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.approvals import ApprovalActivities
from activities.escalation import EscalationActivities
from activities.voice import VoiceActivities
from agentcomms.approval_models import ApprovalRequest, ApprovalView, Decision
from agentcomms.config import Config, PhoneConfig, TemporalConfig, VoiceConfig
from agentcomms.escalation_models import QuietHours, Rung, RungRecord
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from agentcomms.workflow_ids import approval_workflow_id, call_workflow_id
from gateway.approvals.methods import ladder_for
from gateway.approvals.trace import trace_approval
from tests.fakes.ntfy import FakeNtfy
from tests.fakes.twilio import OUR_NUMBER, FakeTwilio
from workflows.approval.client import Approvals, new_approval_id
from workflows.approval.workflow import ApprovalWorkflow
from workflows.call import CallWorkflow

HUMAN = "+15551230000"
TOPIC = "alice-phone"
LADDER = [Rung(after_s=0, via="chat"), Rung(after_s=120, via="sms"), Rung(after_s=300, via="call")]


@dataclass
class Ladders:
    env: WorkflowEnvironment
    client: Client
    approvals: Approvals
    key: DeploymentKey
    twilio: FakeTwilio
    store: Store
    cfg: Config
    ntfy: FakeNtfy

    async def open(
        self,
        rungs: list[Rung] = LADDER,
        *,
        quiet: QuietHours | None = None,
        overrides_quiet: bool = False,
        signed: bool = True,
        timeout_s: float = 900,
    ) -> tuple[ApprovalRequest, WorkflowHandle[ApprovalWorkflow, ApprovalView]]:
        request = self.key.sign_approval(
            ApprovalRequest(
                id=new_approval_id(),
                agent_id="backend",
                tool="Bash",
                input_text="rm -rf build",
                timeout_s=timeout_s,
                on_timeout="deny",
            )
        )
        escalation = ladder_for(
            request,
            rungs,
            quiet=quiet,
            overrides_quiet=overrides_quiet,
            # The test server's clock has skipped ahead of ours: the ladder is checked against
            # the time Temporal started its workflow.
            opened_at=await self.env.get_current_time(),
        )
        if signed:
            escalation = self.key.sign_escalation(escalation)
        await self.approvals.open(request, escalation)
        return request, self.approvals.handle(request.id)

    async def answer(
        self, request: ApprovalRequest, behavior: str = "deny", via: str = "sms"
    ) -> None:
        decision = Decision(
            approval_id=request.id,
            behavior=behavior,
            by="Alice",
            via=via,
        )
        decided = await self.approvals.decide(self.key.sign_decision(decision, request))
        assert decided is not None and decided.accepted

    async def ended(self, handle: WorkflowHandle[ApprovalWorkflow, ApprovalView]) -> ApprovalView:
        """The approval's result, once the test server's clock has run past its end (a handle
        not made by starting the workflow does not skip time by itself)."""
        await self.env.sleep(900 + 300 + 60)
        return await handle.result()

    async def rungs(self, request: ApprovalRequest) -> list[RungRecord]:
        return await self.approvals.rungs(request.id)

    def texts(self) -> list[str]:
        return self.twilio.bodies_to(HUMAN)


@pytest.fixture
async def ladders(time_skipping_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Ladders]:
    twilio = FakeTwilio()
    await twilio.server.start()
    ntfy = FakeNtfy(token=None)
    await ntfy.server.start()
    cfg = Config.model_validate(
        {
            "chat": {
                "channels": {"telegram:42": "backend"},
                "ntfy": {"enabled": True, "topic": TOPIC, "server": ntfy.base_url},
                "sms": {
                    "enabled": True,
                    "account_sid": twilio.account_sid,
                    "auth_token": twilio.auth_token,
                    "from_number": OUR_NUMBER,
                    "base_url": twilio.base_url,
                },
            },
        }
    ).model_copy(
        update={
            "voice": VoiceConfig(
                audio_dir=tmp_path / "audio",
                phone=PhoneConfig(provider="local", to_number=HUMAN),
                tts={"provider": "local"},
            )
        }
    )
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'agentcomms.db'}")
    key = DeploymentKey(b"k" * 40)
    voice = VoiceActivities(cfg, store, key)
    rungs = EscalationActivities(cfg, key, store)
    queue = f"tq-{uuid.uuid4()}"
    client = time_skipping_env.client
    try:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[ApprovalWorkflow, CallWorkflow],
            activities=[
                rungs.fire_rung,
                ApprovalActivities(key).check_decision,
                voice.check_call,
                voice.check_line_event,
                voice.synthesize_speech,
                voice.record_call,
                voice.send_call_fallback,
            ],
        ):
            yield Ladders(
                time_skipping_env,
                client,
                Approvals(client, queue),
                key,
                twilio,
                store,
                cfg.model_copy(update={"temporal": TemporalConfig(task_queue=queue)}),
                ntfy,
            )
            # Let every run end while its worker is here (a call a rung placed rings on): the
            # test server's clock stalls behind a workflow task nobody polls for.
            await time_skipping_env.sleep(6 * 3600)
    finally:
        await store.close()
        await twilio.server.stop()
        await ntfy.server.stop()


async def test_a_push_rung_sends_an_urgent_notification_saying_where_to_answer(
    ladders: Ladders,
) -> None:
    request, handle = await ladders.open(
        [Rung(after_s=0, via="chat"), Rung(after_s=60, via="push")]
    )
    await ladders.ended(handle)
    _chat, push = await ladders.rungs(request)
    assert (push.outcome, push.detail) == ("fired", f"urgent notification to ntfy:{TOPIC}")
    [note] = ladders.ntfy.to(TOPIC)
    assert note["priority"] == 5 and note["title"] == "backend needs you"
    assert note["message"] == (
        f"backend asks to run: rm -rf build\nAnswer {request.id} with the buttons of its "
        "notification, in the agent's chats, with `agentcomms approvals`, or in the console."
    )


def _sms(request: ApprovalRequest) -> str:
    code = request.id
    return (
        f"backend asks to run: rm -rf build\nReply YES {code} or NO {code}. NO {code} followed "
        "by words tells the agent why."
    )


async def test_nobody_answers_and_every_rung_fires_in_turn(ladders: Ladders) -> None:
    request, handle = await ladders.open()
    view = await ladders.ended(handle)
    assert view.decision is not None and view.decision.behavior == "timeout"
    chat, sms, call = await ladders.rungs(request)
    assert [r.outcome for r in (chat, sms, call)] == ["fired"] * 3
    assert chat.detail == "in the agent's chats: telegram:42"
    assert sms.detail == f"SMS to {HUMAN}"
    assert ladders.texts() == [_sms(request)]
    # Each fired when due, after the request opened.
    assert sms.at is not None and sms.at - view.opened_at >= timedelta(seconds=120)
    assert call.at is not None and call.at - view.opened_at >= timedelta(seconds=300)
    call_id = call.detail.split()[1]
    assert call.detail == (
        f"call {call_id} to the local phone (agentcomms phone); the call ended (no-answer): "
        "no answer within 30 s"
    )
    placed = ladders.client.get_workflow_handle_for(CallWorkflow.run, call_workflow_id(call_id))
    ended = await placed.result()  # ended long ago
    assert ended.status == "no-answer"  # nobody took the local phone
    line = await placed.query(CallWorkflow.line)
    assert line.say == (
        "backend asks to run: rm -rf build. Press 1 to allow, 2 to deny, 3 to hear it again."
    )


@pytest.mark.parametrize(("answered_after_s", "fired"), [(10, 1), (130, 2), (310, 3)])
async def test_an_answer_stops_the_ladder_at_the_rung_it_came(
    ladders: Ladders, answered_after_s: int, fired: int
) -> None:
    request, handle = await ladders.open()
    await ladders.env.sleep(answered_after_s)
    await ladders.answer(request)
    view = await ladders.ended(handle)
    assert view.decision is not None and view.decision.via == "sms"
    records = await ladders.rungs(request)
    assert [r.outcome for r in records] == ["fired"] * fired + ["stopped"] * (3 - fired)
    assert all(r.detail == "not fired: answered before it was due" for r in records[fired:])
    assert ladders.texts() == ([_sms(request)] if fired >= 2 else [])
    # `trace` shows every rung, and the answer after the last one that fired.
    traced = await trace_approval(ladders.client, ladders.cfg, request.id.lower())
    assert traced is not None and traced["status"] == "denied by Alice on SMS"
    steps = [s["step"] for s in traced["steps"]]
    assert steps[0] == "opened" and steps[fired + 1] == "answer"
    assert steps[1 : fired + 1] == ["rung 1: chat", "rung 2: sms", "rung 3: call"][:fired]
    assert (
        sorted(steps[fired + 2 :])
        == [f"rung {n}: {v} stopped" for n, v in ((2, "sms"), (3, "call"))][fired - 1 :]
    )


async def test_an_answer_in_the_terminal_stops_the_ladder(ladders: Ladders) -> None:
    request, handle = await ladders.open()
    await ladders.env.sleep(30)
    await ladders.answer(request, behavior="terminal", via="terminal")
    await ladders.env.sleep(600)
    await ladders.ended(handle)
    records = await ladders.rungs(request)
    assert [r.outcome for r in records] == ["fired", "stopped", "stopped"]
    assert ladders.texts() == []


async def test_a_call_still_ringing_when_answered_elsewhere_is_hung_up(
    ladders: Ladders,
) -> None:
    request, handle = await ladders.open([Rung(after_s=0, via="call")])
    await ladders.env.sleep(5)  # the local phone rings for 30 s; nobody takes it
    await ladders.answer(request, behavior="terminal", via="terminal")
    await ladders.ended(handle)
    [call] = await ladders.rungs(request)
    call_id = call.detail.split()[1]
    assert call.detail.endswith(
        "; the call ended (canceled): the request was answered elsewhere before the call was taken"
    )
    placed = ladders.client.get_workflow_handle_for(CallWorkflow.run, call_workflow_id(call_id))
    ended = await placed.result()
    assert ended.status == "canceled" and ended.duration_seconds == 0


def _quiet_around(now: datetime) -> QuietHours:
    """Quiet hours from an hour before `now` to an hour after it (UTC)."""
    start, end = now - timedelta(hours=1), now + timedelta(hours=1)
    return QuietHours.model_validate(
        {"from": start.strftime("%H:%M"), "to": end.strftime("%H:%M"), "tz": "UTC"}
    )


async def test_quiet_hours_hold_every_rung_but_the_first(ladders: Ladders) -> None:
    quiet = _quiet_around(await ladders.env.get_current_time())
    rungs = [Rung(after_s=0, via="chat"), Rung(after_s=120, via="sms")]
    request, handle = await ladders.open(rungs, quiet=quiet, timeout_s=4 * 3600)
    await ladders.env.sleep(600)
    assert ladders.texts() == []  # well past its 120 s, but the hours are quiet
    [chat] = await ladders.rungs(request)
    assert chat.outcome == "fired"
    await ladders.env.sleep(3_700)  # the quiet hours are over
    chat, sms = await ladders.rungs(request)
    assert sms.outcome == "fired" and sms.held_until is not None
    assert sms.at is not None and sms.at >= sms.held_until
    assert ladders.texts() == [_sms(request)]
    await ladders.answer(request)
    await ladders.ended(handle)


async def test_an_urgent_request_is_not_held_by_quiet_hours(ladders: Ladders) -> None:
    quiet = _quiet_around(await ladders.env.get_current_time())
    rungs = [Rung(after_s=0, via="chat"), Rung(after_s=120, via="sms")]
    request, handle = await ladders.open(rungs, quiet=quiet, overrides_quiet=True)
    await ladders.env.sleep(130)
    _chat, sms = await ladders.rungs(request)
    assert sms.outcome == "fired" and sms.held_until is None
    assert ladders.texts() == [_sms(request)]
    await ladders.answer(request)
    await ladders.ended(handle)


async def test_a_rung_that_cannot_be_used_is_skipped_and_said_so(ladders: Ladders) -> None:
    request, handle = await ladders.open(
        [Rung(after_s=0, via="chat"), Rung(after_s=0, via="sms")], signed=True
    )
    ladders.twilio.fail_next(400)  # Twilio refuses the number: the SMS cannot go
    await ladders.env.sleep(5)
    _chat, sms = await ladders.rungs(request)
    assert sms.outcome == "skipped" and sms.detail.startswith("skipped: the SMS was refused")
    await ladders.answer(request)
    await ladders.ended(handle)


async def test_a_ladder_the_deployment_did_not_sign_reaches_nobody(ladders: Ladders) -> None:
    request, handle = await ladders.open(signed=False)
    view = await ladders.ended(handle)
    assert view.decision is not None and view.decision.behavior == "timeout"
    records = await ladders.rungs(request)
    assert [r.outcome for r in records] == ["failed"] * 3
    assert "not signed by this deployment" in records[1].detail
    assert ladders.texts() == []


async def test_a_call_still_ringing_when_the_request_times_out_says_it_timed_out(
    ladders: Ladders,
) -> None:
    request, handle = await ladders.open([Rung(after_s=0, via="call")], timeout_s=10)
    view = await ladders.ended(handle)  # the local phone rings for 30 s; nobody takes it
    assert view.decision is not None and view.decision.behavior == "timeout"
    [call] = await ladders.rungs(request)
    assert call.detail.endswith(
        "; the call ended (canceled): the request timed out before the call was taken"
    )


async def test_a_genuine_ladder_started_again_texts_nobody_again(ladders: Ladders) -> None:
    """The attack: the request's workflow terminated, and started again at once (within the
    ladder's window) with its own input, as its history shows it: its rungs fired already."""
    request, handle = await ladders.open([Rung(after_s=0, via="sms")])
    await ladders.env.sleep(5)
    assert len(ladders.texts()) == 1
    history = await handle.fetch_history()
    copied = json.loads(
        history.events[0].workflow_execution_started_event_attributes.input.payloads[0].data
    )
    await handle.terminate()
    again = await ladders.client.start_workflow(
        "ApprovalWorkflow",
        copied,
        id=approval_workflow_id(request.id),
        task_queue=ladders.cfg.temporal.task_queue,
    )
    await ladders.env.sleep(5)
    assert len(ladders.texts()) == 1
    [sms] = await ladders.rungs(request)
    assert sms.outcome == "failed" and "fired already" in sms.detail, sms
    await again.terminate()
