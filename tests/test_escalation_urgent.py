"""An agent's urgent message climbs its ladder on the time-skipping test server until the human
writes to the agent; quiet hours do not hold it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.escalation import EscalationActivities
from activities.voice import VoiceActivities
from agentcomms.config import Config
from agentcomms.models import Event
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from gateway.messages.urgent import UrgentMessages
from tests.fakes.ntfy import FakeNtfy
from tests.fakes.twilio import OUR_NUMBER, FakeTwilio
from workflows.call import CallWorkflow
from workflows.escalation.models import Answered
from workflows.escalation.workflow import EscalationWorkflow

HUMAN = "+15551230000"
TOPIC = "alice-phone"
# The urgent messages, the Twilio and ntfy stand-ins, and what reached the agent's mailbox.
Urgent = tuple[UrgentMessages, FakeTwilio, list[Event], FakeNtfy]


@pytest.fixture
async def urgent(time_skipping_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Urgent]:
    twilio = FakeTwilio()
    await twilio.server.start()
    ntfy = FakeNtfy(token=None)
    await ntfy.server.start()
    queue = f"tq-{uuid.uuid4()}"
    now = await time_skipping_env.get_current_time()
    # Quiet hours right now: an urgent message is not held by them.
    quiet = {
        "from": (now - timedelta(hours=1)).strftime("%H:%M"),
        "to": (now + timedelta(hours=1)).strftime("%H:%M"),
    }
    cfg = Config.model_validate(
        {
            "temporal": {"task_queue": queue},
            "escalation": [
                {"after_s": 0, "via": "chat"},
                {"after_s": 120, "via": "sms"},
                {"after_s": 120, "via": "push"},
                {"after_s": 300, "via": "call"},
            ],
            "quiet_hours": quiet,
            "chat": {
                "ntfy": {"enabled": True, "topic": TOPIC, "server": ntfy.base_url},
                "sms": {
                    "enabled": True,
                    "account_sid": twilio.account_sid,
                    "auth_token": twilio.auth_token,
                    "from_number": OUR_NUMBER,
                    "base_url": twilio.base_url,
                },
            },
            "voice": {
                "audio_dir": str(tmp_path / "audio"),
                "phone": {"provider": "local", "to_number": HUMAN},
                "tts": {"provider": "local"},
            },
        }
    )
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'agentcomms.db'}")
    key = DeploymentKey(b"k" * 40)
    told: list[Event] = []

    async def post(event: Event) -> str:  # the agent's mailbox, for what a call heard
        told.append(event)
        return event.id

    voice = VoiceActivities(cfg, store, key, post=post)
    rungs = EscalationActivities(cfg, key, store)
    client = time_skipping_env.client
    try:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[EscalationWorkflow, CallWorkflow],
            activities=[
                rungs.fire_rung,
                rungs.check_escalation_answered,
                voice.check_call,
                voice.check_line_event,
                voice.synthesize_speech,
                voice.record_call,
                voice.post_call_answer,
            ],
        ):
            # Stamped with the test server's clock, which earlier tests skipped ahead.
            clock = await time_skipping_env.get_current_time()
            messages = UrgentMessages(cfg, client, key, store, clock=lambda: clock)
            yield messages, twilio, told, ntfy
            # Let every run end while its worker is here (a call a rung placed rings on): the
            # test server's clock stalls behind a workflow task nobody polls for.
            await time_skipping_env.sleep(3600)
    finally:
        await store.close()
        await twilio.server.stop()
        await ntfy.server.stop()


def _agent(test: str) -> str:
    """An agent of this test's own (each ladder is `escalation-<agent>` on a shared server)."""
    return f"{test}-{uuid.uuid4().hex[:8]}"


def _human(text: str, agent: str) -> Event:
    return Event(
        id=f"evt_{uuid.uuid4().hex}",
        agent_id=agent,
        channel_id="telegram:42",
        type="human_message",
        role="human",
        payload={"text": text, "provider": "telegram"},
    )


async def test_an_urgent_message_texts_until_the_human_writes_back(
    urgent: Urgent, time_skipping_env: WorkflowEnvironment
) -> None:
    messages, twilio, _, ntfy = urgent
    agent = _agent("urgent-texts")
    started = await messages.sent(agent, "evt_1", "Prod is down, may I roll back?")
    assert started == {"escalation": f"escalation-{agent}"}
    await time_skipping_env.sleep(130)
    assert twilio.bodies_to(HUMAN) == [f"{agent} says: Prod is down, may I roll back?"]
    [note] = [n for n in ntfy.to(TOPIC) if n["title"] == f"{agent} needs you"]
    assert (note["message"], note["priority"]) == (
        f"{agent} says: Prod is down, may I roll back?",
        5,
    )
    await messages.heard(_human("yes, roll back", agent))
    await time_skipping_env.sleep(600)
    rungs = await messages.rungs(agent)
    assert [(r.via, r.outcome) for r in rungs] == [
        ("chat", "skipped"),  # no chat is mapped to the agent
        ("sms", "fired"),
        ("push", "fired"),
        ("call", "stopped"),
    ]
    assert twilio.bodies_to(HUMAN) == [f"{agent} says: Prod is down, may I roll back?"]


async def test_an_agents_message_does_not_stop_its_ladder(
    urgent: Urgent, time_skipping_env: WorkflowEnvironment
) -> None:
    messages, _, told, _ = urgent
    agent = _agent("urgent-agents-own")
    await messages.sent(agent, "evt_2", "Disk is full.")
    await messages.heard(_human("x", agent).model_copy(update={"role": "agent"}))
    await time_skipping_env.sleep(310)
    rungs = await messages.rungs(agent)
    assert [r.outcome for r in rungs][1:] == ["fired", "fired", "fired"]
    assert rungs[3].detail.endswith("to the local phone (agentcomms phone)")
    await time_skipping_env.sleep(60)  # nobody takes the local phone
    assert [e.payload["status"] for e in told] == ["no-answer"]  # and the agent is told


async def test_a_forged_answered_stops_nothing(
    urgent: Urgent, time_skipping_env: WorkflowEnvironment
) -> None:
    messages, twilio, _, _ = urgent
    agent = _agent("urgent-forged-answer")
    await messages.sent(agent, "evt_3", "Prod is down.")
    # Anyone who reaches Temporal can signal: unsigned, signed with another key, and a genuine
    # answer heard before this ladder opened (copied from an older one).
    raw = time_skipping_env.client.get_workflow_handle(f"escalation-{agent}")
    await raw.signal("answered", {"via": "telegram", "at": "2030-01-01T00:00:00Z"})
    stranger = DeploymentKey(b"x" * 40)
    forged = stranger.sign_escalation_answered(agent, Answered(via="sms", at=datetime.now(UTC)))
    await raw.signal(EscalationWorkflow.answered, forged)
    old = DeploymentKey(b"k" * 40).sign_escalation_answered(
        agent, Answered(via="sms", at=datetime(2000, 1, 1, tzinfo=UTC))
    )
    await raw.signal(EscalationWorkflow.answered, old)
    await time_skipping_env.sleep(130)
    rungs = await messages.rungs(agent)
    assert [(r.via, r.outcome) for r in rungs] == [
        ("chat", "skipped"),
        ("sms", "fired"),
        ("push", "fired"),
    ]
    assert twilio.bodies_to(HUMAN) == [f"{agent} says: Prod is down."]
    # The gateway's own answer still stops it.
    await messages.heard(_human("on it", agent))
    await time_skipping_env.sleep(600)
    assert [r.outcome for r in await messages.rungs(agent)] == [
        "skipped",
        "fired",
        "fired",
        "stopped",
    ]


async def test_writing_back_while_its_call_rings_hangs_the_call_up(
    urgent: Urgent, time_skipping_env: WorkflowEnvironment
) -> None:
    messages, _, told, _ = urgent
    agent = _agent("urgent-call")
    await messages.sent(agent, "evt_4", "Disk is full.")
    await time_skipping_env.sleep(305)  # its call rings the local phone; nobody takes it yet
    await messages.heard(_human("freeing it now", agent))
    await time_skipping_env.sleep(60)
    *_, call = await messages.rungs(agent)
    assert call.outcome == "fired"
    assert call.detail.endswith(
        "; the call ended (canceled): the human answered elsewhere before the call was taken"
    )
    # The agent is told why its call ended (not that nobody took it).
    [notice] = [e for e in told if e.agent_id == agent]
    assert notice.payload["status"] == "canceled"
    assert "the human answered elsewhere" in notice.text
