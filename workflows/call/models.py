"""What the gateway asks a call and what it answers: the workflow's input, its updates' requests
and results. The gateway imports these; the call's activities' models (and the input, which
they check) are ``agentcomms.voice.models``."""

from __future__ import annotations

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcomms.models import CallStatus

    # The input lives beside the call's activities' models: they check its tag.
    from agentcomms.voice.models import CallInput as CallInput

    # The agent's turns, signed by the gateway: their tag is checked like the input's.
    from agentcomms.voice.models import End as End
    from agentcomms.voice.models import Say as Say

# A wait_line caller asks again after at most this long.
MAX_LINE_WAIT_S = 60.0


class TurnResult(BaseModel):
    call_id: str
    turn: int = 0
    response: str = ""
    status: str = "answered"  # answered | timed-out | hung-up | no-answer | declined | ...
    timed_out: bool = False
    success: bool = True
    note: str | None = None


class Ended(BaseModel):
    call_id: str
    duration_seconds: float
    status: CallStatus
    reason: str | None = None


class WaitLine(BaseModel):
    after_version: int
    timeout_s: float = Field(default=20, gt=0, le=MAX_LINE_WAIT_S)
