"""An escalation ladder: how a request nobody answers comes to find its human, rung by rung (a
chat, then an SMS or a push notification, then a call), and what each rung did.

The config holds the ladder (`escalation`, `quiet_hours`, per agent or for all); the gateway turns
it into an :class:`Escalation` for one request and signs it; the workflow waiting for the answer
climbs it on durable timers and keeps a :class:`RungRecord` per rung for `trace`. Workflows import
this module, so it holds only pydantic models and the standard library.
"""

from __future__ import annotations

import itertools
import re
from datetime import datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentcomms.voice.models import CallInput, LineEvent

Via = Literal["chat", "sms", "push", "call"]
RungOutcome = Literal["fired", "skipped", "failed", "stopped"]
_CLOCK = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")


class Rung(BaseModel):
    """One rung: `after_s` seconds after the request opened, reach the human `via` this."""

    model_config = ConfigDict(extra="forbid")

    after_s: float = Field(ge=0, le=7 * 86_400, description="seconds after the request opened")
    via: Via = Field(
        description="chat (the agent's chats), sms (voice.phone.to_number), push (an urgent "
        "notification to chat.ntfy.topic), call"
    )


def check_ladder(rungs: list[Rung]) -> list[Rung]:
    """A ladder climbs: each rung no earlier than the one before it."""
    for before, rung in itertools.pairwise(rungs):
        if rung.after_s < before.after_s:
            raise ValueError(
                f"the {rung.via} rung (after_s {rung.after_s:g}) comes before the "
                f"{before.via} rung above it (after_s {before.after_s:g}): list the rungs in "
                "the order they fire, each after_s no smaller than the one before"
            )
    return rungs


class QuietHours(BaseModel):
    """A daily span (`from` to `to`, in `tz`) when only a ladder's first rung fires; the others
    wait for its end. `from` after `to` spans midnight (22:00 to 07:00)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    start: str = Field(alias="from", description='HH:MM, e.g. "22:00"')
    end: str = Field(alias="to", description='HH:MM, e.g. "07:00"')
    tz: str = Field(default="UTC", description='an IANA time zone, e.g. "Europe/Berlin"')

    @field_validator("start", "end")
    @classmethod
    def _clock(cls, value: str) -> str:
        if not _CLOCK.match(value):
            raise ValueError(f'expected a time of day as HH:MM (24 h), e.g. "22:00", not {value!r}')
        return value

    @field_validator("tz")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f'unknown time zone {value!r}; use an IANA name such as "Europe/Berlin" or "UTC"'
            ) from None
        return value

    def over_at(self, moment: datetime) -> datetime | None:
        """When the quiet hours that `moment` falls in end; None when it falls outside them."""
        zone = ZoneInfo(self.tz)
        local = moment.astimezone(zone)
        start, end = _clock(self.start), _clock(self.end)
        now = local.time()
        if start == end:
            return None  # no span at all
        if start < end:
            inside = start <= now < end
            ends_on = local.date()
        else:  # spans midnight
            inside = now >= start or now < end
            ends_on = local.date() + timedelta(days=1) if now >= start else local.date()
        if not inside:
            return None
        return datetime.combine(ends_on, end, tzinfo=zone).astimezone(moment.tzinfo)


def _clock(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


class Escalation(BaseModel):
    """One request's ladder, decided when it opened and tagged by the gateway: the rungs, what
    each says, and whether quiet hours hold them. The rungs' activities act on nothing else."""

    kind: Literal["approval", "message"] = "approval"
    subject_id: str  # the approval's id (its reply code), or the urgent message's event id
    agent_id: str
    # What the agent wants, as one sentence a person reads or hears: "backend asks to run: ls".
    text: str
    # What a call says after it: the key for each answer ("Press 1 to allow, …"); None for an
    # urgent message, whose call listens to what the human says.
    keys: str | None = None
    several_keys: bool = False  # the answer may be several keys, ended by the pound key
    # How to answer the SMS by reply ("Reply YES K7QF or NO K7QF").
    reply: str | None = None
    rungs: list[Rung]
    quiet_hours: QuietHours | None = None
    # An urgent message, or an agent that never sleeps: quiet hours hold nothing.
    overrides_quiet: bool = False
    opened_at: datetime  # when the gateway opened it: a copy started long after acts on nothing
    signature: str | None = None


class EscalationAnswered(BaseModel):
    """The human wrote to the agent (anywhere) after its urgent message: the ladder has done its
    work. Tagged by the gateway that heard it: anyone can signal a workflow."""

    via: str  # the surface: telegram, sms, cli, …
    at: datetime  # when the gateway heard it: one from before the ladder opened is not its
    signature: str | None = None


class AnswerCheck(BaseModel):
    """An `answered` signalled to a ladder, to be checked against the deployment's tag."""

    escalation: Escalation
    answered: EscalationAnswered


class RungStep(BaseModel):
    """Fire rung `rung` of a signed ladder (an activity's input)."""

    escalation: Escalation
    rung: int
    started_at: datetime  # the workflow's start, as the server recorded it
    now: datetime  # the workflow's time as the rung fires (a call is placed then)


class RungResult(BaseModel):
    """What a rung's activity did: fired (where), or skipped (why); a call rung's call, signed,
    for the workflow to place."""

    fired: bool
    detail: str
    call: CallInput | None = None
    # The call's "withdrawn", signed for it alone: once the request is answered elsewhere, the
    # ladder hangs up the call it placed with this.
    withdraw: LineEvent | None = None
    # The same for a request that nobody answered in time (the call says so instead).
    withdraw_timed_out: LineEvent | None = None
    # A call rung that found the human's phone on another call (its id) placed nothing: the
    # ladder waits for that call to end (it may carry this request too), then asks again.
    line_busy: str | None = None


class RungRecord(BaseModel):
    """One rung as `trace` shows it: when it fired (or why it did not), where, and the answer."""

    rung: int
    via: Via
    due_at: datetime
    at: datetime | None = None
    outcome: RungOutcome
    detail: str
    held_until: datetime | None = None  # quiet hours moved it here
