"""What a message rebuilt from Temporal shows, from what its mailbox's runs kept: the rule,
case by case, without Temporal (tests/test_projection_rebuild.py runs it end to end)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import SecretStr

from agentcomms.config import SecurityConfig
from agentcomms.errors import NOT_SIGNED_SENTENCE
from agentcomms.models import DeliveryOutcome, Event
from agentcomms.trust import DeploymentKey
from gateway.rebuild import read_up_to
from gateway.rebuild.mailboxes import FORGOTTEN, REASON_FORGOTTEN, MailboxReading, shown

KEY = DeploymentKey.load(
    SecurityConfig(deployment_key=SecretStr("the-rules-of-a-projection-rebuilt-from-temporal"))
)
SENT = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
TYPED = SENT + timedelta(seconds=1)


def message(agent: str = "backend", *, signed: bool = True) -> Event:
    event = Event(
        id="evt_1",
        agent_id=agent,
        channel_id="cli:local",
        type="human_message",
        role="human",
        payload={"text": "hello"},
        created_at=SENT,
    )
    return KEY.sign_event(event) if signed else event


def typed(rejected: str | None = None) -> tuple[datetime, DeliveryOutcome]:
    return TYPED, DeliveryOutcome(event_id="evt_1", typed=True, rejected=rejected)


# (what the runs kept, the event, waiting?) -> (status, error, delivered_at)
CASES: list[tuple[str, dict[str, Any], Event, bool, tuple[str, str | None, datetime | None]]] = [
    ("still waiting", {}, message(), True, ("new", None, None)),
    ("typed, its outcome kept", {"outcomes": {"evt_1": "delivered"}, "typed": {"evt_1": typed()}},
     message(), False, ("delivered", None, TYPED)),
    ("typed, its outcome forgotten since", {"typed": {"evt_1": typed()}}, message(), False,
     ("delivered", None, TYPED)),
    ("refused where it was typed", {"typed": {"evt_1": typed("not signed")}}, message(), False,
     ("rejected", "not signed", None)),
    ("failed, its reason kept as a note", {"outcomes": {"evt_1": "failed"},
     "notes": {"evt_1": "interrupt too old"}}, message(), False,
     ("failed", "interrupt too old", None)),
    ("failed, its reason not kept", {"outcomes": {"evt_1": "failed"}}, message(), False,
     ("failed", REASON_FORGOTTEN, None)),
    ("nothing kept of what became of it", {}, message(), False, ("failed", FORGOTTEN, None)),
    ("put into Temporal by someone else", {}, message(signed=False), True,
     ("rejected", NOT_SIGNED_SENTENCE, None)),
    ("signed for another agent", {"typed": {"evt_1": typed()}}, message("frontend"), False,
     ("rejected", NOT_SIGNED_SENTENCE, None)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kept", "event", "waiting", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_rebuilt_message_shows_what_its_mailbox_kept_of_it(
    kept: dict[str, Any], event: Event, waiting: bool, expected: tuple[str, str | None, Any]
) -> None:
    reading = MailboxReading("backend", KEY, **kept)
    row = shown(reading, event, {event.id} if waiting else set())
    assert (row.status, row.error, row.delivered_at) == expected
    assert row.payload == event.payload  # the text as it was signed, whatever became of it


def test_an_unrecorded_settlement_is_written_as_the_mailbox_settled_it() -> None:
    settled = message().model_copy(
        update={"status": "delivered", "note": "cut at 10 characters", "delivered_at": TYPED}
    )
    reading = MailboxReading("backend", KEY, settled={"evt_1": settled})
    assert shown(reading, message(), set()) == settled


def read(*rows: tuple[str, str, str]) -> str | None:
    events = [
        Event(id=i, agent_id="a", channel_id="cli:local", type=t, role="human", status=s)
        for i, t, s in rows
    ]
    return read_up_to(events)


def test_an_agent_has_read_what_was_typed_for_it_up_to_the_first_that_waits() -> None:
    assert read() is None
    assert read(("e1", "human_message", "delivered"), ("e2", "human_message", "new")) == "e1"
    assert read(("e1", "human_message", "delivered"), ("e2", "interrupt", "delivered")) == "e1"
    assert read(("e1", "human_message", "delivered"), ("e2", "agent_message", "rejected")) == "e1"
    assert read(("e1", "human_message", "new"), ("e2", "human_message", "delivered")) is None
