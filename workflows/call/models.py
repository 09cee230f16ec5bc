"""What the gateway asks a call and what it answers: the workflow's input, its updates' requests
and results. The gateway imports these; the call's activities' models are
``agentcomms.voice.models``."""

from __future__ import annotations

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcomms.models import CallStatus
    from agentcomms.voice.models import CallSystem

# A wait_line caller asks again after at most this long.
MAX_LINE_WAIT_S = 60.0


class CallInput(BaseModel):
    """Everything a call needs, decided when it is placed (the workflow reads no config)."""

    call_id: str
    agent_id: str
    message: str
    system: CallSystem = "local"
    to_number: str | None = None
    tts: list[str] = Field(default_factory=lambda: ["local"])
    stt: list[str] = Field(default_factory=lambda: ["local"])
    ring_timeout_s: float = 30
    transcript_timeout_s: float = 180
    max_duration_s: float = 1800
    fallback: bool = True  # nobody answered: send the message another way
    fallback_message: str = "I tried calling but couldn't reach you. Here's my message: {message}"
    # Non-blocking: the first answer goes to the agent's mailbox instead of a waiting caller.
    notify_mailbox: bool = False


class Say(BaseModel):
    message: str
    listen: bool = True


class TurnResult(BaseModel):
    call_id: str
    turn: int = 0
    response: str = ""
    status: str = "answered"  # answered | timed-out | hung-up | no-answer | declined | ...
    timed_out: bool = False
    success: bool = True
    note: str | None = None


class End(BaseModel):
    message: str | None = None


class Ended(BaseModel):
    call_id: str
    duration_seconds: float
    status: CallStatus
    reason: str | None = None


class WaitLine(BaseModel):
    after_version: int
    timeout_s: float = Field(default=20, gt=0, le=MAX_LINE_WAIT_S)
