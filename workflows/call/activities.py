"""The activities a call runs, declared by their signatures so the workflow calls them by
reference without importing the code that speaks, listens, dials or writes the database.

All run as local activities of the call's own workflow, and refuse any other caller: Temporal
authenticates no one, so a workflow or worker anyone runs must not make a worker ring, speak,
text or write. The call starts by checking the deployment's tag on its input (``check_call``)
and checks every line event's (``check_line_event``) before it counts, and every turn the
agent asks (``check_turn``) before it is said. The worker registers
:class:`activities.voice.VoiceActivities` and :class:`activities.voice.TwilioCallActivities`
under the same names; ``tests/test_activity_declarations.py`` checks that each declaration has an
implementation with the same name, input and result.
"""

from __future__ import annotations

from temporalio import activity

from agentcomms.voice.models import (
    AudioRef,
    CallCheck,
    CallInput,
    CallNotice,
    CallUpdate,
    FallbackRequest,
    LineCheck,
    LineEvent,
    LiveCall,
    PlaceCall,
    SpeechRequest,
    TranscribeRequest,
    Transcript,
    TurnCheck,
)
from workflows.activities import declared


@activity.defn(name="check_call")
async def check_call(req: CallCheck) -> CallInput:
    """The call's input, once the deployment's tag on it checks out (refused otherwise)."""
    raise declared()


@activity.defn(name="check_line_event")
async def check_line_event(req: LineCheck) -> LineEvent:
    """The line event, once the gateway's tag on it for this call checks out."""
    raise declared()


@activity.defn(name="check_turn")
async def check_turn(req: TurnCheck) -> bool:
    """True once the gateway's tag on the agent's turn for this call checks out."""
    raise declared()


@activity.defn(name="synthesize_speech")
async def synthesize_speech(req: SpeechRequest) -> AudioRef:
    """Speak the text with one provider into the audio directory; its reference back."""
    raise declared()


@activity.defn(name="transcribe_speech")
async def transcribe_speech(req: TranscribeRequest) -> Transcript:
    """What the human said in a recording, by one provider."""
    raise declared()


@activity.defn(name="record_call")
async def record_call(update: CallUpdate) -> None:
    """Write the call's row, and append its new turns to the call's transcript file."""
    raise declared()


@activity.defn(name="send_call_fallback")
async def send_call_fallback(req: FallbackRequest) -> str:
    """Leave an unanswered call's message where the human will see it; says where."""
    raise declared()


@activity.defn(name="post_call_answer")
async def post_call_answer(notice: CallNotice) -> str:
    """Put a call's outcome in the agent's mailbox; the event id back."""
    raise declared()


@activity.defn(name="place_twilio_call")
async def place_twilio_call(req: PlaceCall) -> LiveCall:
    """Ring the human's number through Twilio; the live call back."""
    raise declared()


@activity.defn(name="update_twilio_call")
async def update_twilio_call(live: LiveCall) -> None:
    """Have the live call fetch the next turn's TwiML now."""
    raise declared()


@activity.defn(name="end_twilio_call")
async def end_twilio_call(live: LiveCall) -> None:
    """Hang up (or stop the ringing of) a call."""
    raise declared()
