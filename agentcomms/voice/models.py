"""What the call workflow and the voice activities hand each other: references, never audio.

Workflows import this module, so it holds only pydantic models, the standard library and core
models. A call's projection row (``CallRecord``) is in ``agentcomms.models``, beside the other rows.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from agentcomms.models import CallRecord

# An audio reference names a file under the audio directory: "<call id>/<file>". Nothing else
# (no "..", no absolute path) can be named, whoever sends the reference.
# What the local phone may send of one answer: base64 in one socket request line, under the
# gateway's 1 MB cap (about 21 s of 16 kHz mono speech).
MAX_PHONE_RECORDING_BYTES = 700_000
AUDIO_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,80}/[A-Za-z0-9_-]{1,80}\.(wav|mp3)$"

CallSystem = Literal["local", "twilio"]


class CallInput(BaseModel):
    """Everything a call needs, decided when it is placed (the workflow reads no config), and
    tagged by the gateway that placed it: a call anyone else starts is refused."""

    call_id: str
    agent_id: str
    message: str
    system: CallSystem = "local"
    to_number: str | None = None  # shown in the call's row; what is dialled is the config's
    tts: list[str] = Field(default_factory=lambda: ["local"])
    stt: list[str] = Field(default_factory=lambda: ["local"])
    ring_timeout_s: float = 30
    transcript_timeout_s: float = 180
    max_duration_s: float = 1800
    fallback: bool = True  # nobody answered: send the message another way
    fallback_message: str = "I tried calling but couldn't reach you. Here's my message: {message}"
    # Non-blocking: the first answer goes to the agent's mailbox instead of a waiting caller.
    notify_mailbox: bool = False
    # A ladder's call about a request: a key pressed (or an answer said) decides it.
    approval_id: str | None = None
    several_keys: bool = False  # its answer may be several keys, ended by the pound key
    # When the gateway placed it: a copy of a genuine input started long after is refused.
    placed_at: datetime | None = None
    signature: str | None = None  # the deployment's tag over everything above


class CallCheck(BaseModel):
    """A call's input, checked against the deployment's tag as its workflow starts."""

    call: CallInput
    started_at: datetime  # the workflow's start, as the server recorded it


def check_audio_name(value: str) -> str:
    if not re.fullmatch(AUDIO_NAME_PATTERN, value):
        raise ValueError(f"{value!r} is not an audio reference (<call id>/<name>.wav)")
    return value


class AudioRef(BaseModel):
    """A sound file in the audio directory, by name; workflows carry this, not the audio."""

    name: str
    duration_s: float = 0.0
    content_type: str = "audio/wav"
    provider: str | None = None  # who made it: a TTS provider, "phone", "twilio"
    took_ms: float | None = None  # how long the provider took to make it

    _check_name = field_validator("name")(check_audio_name)


class SpeechRequest(BaseModel):
    """Synthesize `text` with one provider into the audio file `name`."""

    provider: str
    text: str
    name: str


class TranscribeRequest(BaseModel):
    """Transcribe the audio file with one provider."""

    provider: str
    audio: AudioRef


class Transcript(BaseModel):
    text: str
    provider: str
    took_ms: float | None = None  # how long the provider took to hear it


class TurnRecord(BaseModel):
    """One side of one turn, appended to the call's transcript file (on a call in, the
    deployment's menu speaks, not an agent)."""

    turn: int
    speaker: Literal["agent", "human", "menu"]
    text: str
    at: datetime
    audio: str | None = None
    note: str | None = None


class CallUpdate(BaseModel):
    """A projection write of a call: its row, and the turn lines to append to its transcript."""

    call: CallRecord
    turns: list[TurnRecord] = Field(default_factory=list)


class CallNotice(BaseModel):
    """A call's outcome for the agent's mailbox (non-blocking calls); whose call it is, the
    activity reads from the signed call itself."""

    call: CallInput
    turn: int
    response: str = ""
    note: str | None = None
    timed_out: bool = False
    status: str = "answered"

    def text(self) -> str:
        """What the agent reads: ``[phone call <id>] <the answer>``, or why there is none."""
        prefix = f"[phone call {self.call.call_id}]"
        if self.status in ("answered", "timed-out") and self.response:
            return f"{prefix} {self.response}"
        return f"{prefix} ({self.note or self.status})"


class FallbackRequest(BaseModel):
    """The message of a call nobody answered, sent another way: the text is the signed call's,
    the number the config's."""

    call: CallInput


LineState = Literal["dialing", "ringing", "connected", "ended"]
LineEventKind = Literal[
    "ringing", "answered", "declined", "busy", "no-answer", "failed", "machine",
    "played", "heard", "partial", "hangup", "withdrawn",
]  # fmt: skip


class Line(BaseModel):
    """What a phone needs to know now; `version` grows with every change."""

    call_id: str
    agent_id: str
    version: int = 0
    state: LineState = "dialing"
    turn: int = 0
    say: str | None = None
    audio: AudioRef | None = None
    # What the call waits for from the phone in this turn: the human's answer, or word that
    # the words were played (then nothing is listened to).
    expect: Literal["answer", "played"] | None = None
    answered_by: str | None = None
    ended_reason: str | None = None
    # A ladder's call about a request: the phone takes a key (or several) for the answer.
    approval_id: str | None = None
    several_keys: bool = False


# Why a ladder withdraws its call, as the withdrawn line event's detail (signed with it): the
# request was answered elsewhere, or nobody answered it in time.
WITHDRAWN_ANSWERED = "answered elsewhere"
WITHDRAWN_TIMED_OUT = "timed out"
# The agent ended its call before anyone took it (the call's own ring outcome, never signalled).
WITHDRAWN_BY_THE_AGENT = "ended by the agent"


class LineEvent(BaseModel):
    """Something that happened on the line, reported by the phone or the call system, and
    tagged by the gateway that heard it (:mod:`agentcomms.trust`): the call acts on nothing
    else."""

    kind: LineEventKind
    turn: int | None = None  # for played / heard / partial: the turn it belongs to
    text: str | None = None  # heard / partial: what was said, when it came as text
    audio: AudioRef | None = None  # heard: the recording, when it came as sound
    phone_id: str | None = None  # which phone answered (several may ring)
    detail: str | None = None
    signature: str | None = None  # the deployment's tag, bound to the call


class Say(BaseModel):
    """The agent's next words in a call (with `listen`, the human's answer back). Signed by the
    gateway for one call, with an id of its own: anyone can send a call's workflow an update,
    and words of theirs would be said in the agent's call, its answer theirs to read."""

    message: str
    listen: bool = True
    id: str = ""  # drawn when signed; a call says each once
    signature: str | None = None


class End(BaseModel):
    """Hang the call up, after a goodbye when there is one; signed like `Say`."""

    message: str | None = None
    id: str = ""
    signature: str | None = None


class TurnCheck(BaseModel):
    """One of the agent's turns asked of a call, to be checked against the deployment's tag."""

    call_id: str
    # One of the two (not a union: a Say whose fields are all defaults reads as an End).
    say: Say | None = None
    end: End | None = None

    @property
    def turn(self) -> Say | End:
        turn = self.say or self.end
        if turn is None:
            raise ValueError("a turn check names the words to say or the goodbye")
        return turn


class LineCheck(BaseModel):
    """A line event for one call, to be checked against the deployment's tag."""

    call_id: str
    event: LineEvent


class PlaceCall(BaseModel):
    """Ask the call system to ring the human's number (the config's) for this signed call; its
    webhooks carry the call's id in their paths."""

    call: CallInput


class LiveCall(BaseModel):
    """A call the call system has placed (its own id, e.g. Twilio's CA…)."""

    call_id: str
    sid: str
    answered: bool = False  # hanging up: an answered call is completed, a ringing one canceled
