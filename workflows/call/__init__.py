"""CallWorkflow: one phone call (``call-<call_id>``) between an agent and its human.

The run places the call and carries out the first turn; every later turn is an update
(``say`` to speak and maybe listen, ``end`` to say goodbye and hang up). What happens on the
line (answered, played, heard, hung up) arrives as ``line_event`` signals, from the local phone
through the gateway or from the call system's webhooks. The ``line`` query (and the ``wait_line``
update, which waits for it to change) tells a phone what to play.

Audio never travels in a payload: activities write it to the audio directory and the workflow
carries names (``AudioRef``). The transcript goes to a file beside the projection's call row; the
workflow keeps only the turn at hand.

The activities it runs are declared by signature in :mod:`.activities`, so it calls them by
reference; the gateway's side of the call is ``gateway/phone/calls.py``.
"""

from workflows.call.models import CallInput, End, Ended, Say, TurnResult, WaitLine
from workflows.call.workflow import CallWorkflow

__all__ = ["CallInput", "CallWorkflow", "End", "Ended", "Say", "TurnResult", "WaitLine"]
