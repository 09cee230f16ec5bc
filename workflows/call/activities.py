"""The activities a call runs, declared by their signatures so the workflow calls them by
reference without importing the code that speaks, listens, dials or writes the database.

Speech (``synthesize_speech``, ``transcribe_speech``) runs as local activities: a turn waits on
them. The rest are retried activities on the shared task queue. The worker registers
:class:`activities.voice.VoiceActivities` and :class:`activities.voice.TwilioCallActivities`
under the same names; ``tests/test_activity_declarations.py`` checks that each declaration has an
implementation with the same name, input and result.
"""

from __future__ import annotations

from temporalio import activity

from agentcomms.voice.models import (
    AudioRef,
    CallNotice,
    CallUpdate,
    FallbackRequest,
    LiveCall,
    PlaceCall,
    SpeechRequest,
    TranscribeRequest,
    Transcript,
)
from workflows.activities import declared


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
