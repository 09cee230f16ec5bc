"""Every retry policy and activity timeout the workflows use, in one place.

Workflows import this module, so it uses only the standard library, ``temporalio`` and the error
type names of :mod:`agentcomms.errors` (itself stdlib-only). A workflow's own waits (a ring
timeout, a missing pane's backoff, a batch's typing budget) are its behaviour and stay beside it.

Projection writes retry until the database answers: the projection is a copy of what the history
holds, a workflow has nothing better to do than wait for it, and no call site handles a failure
(one would fail the workflow: an outbox and its queue, a call in the middle of a turn).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

from agentcomms import errors

# ---- the projection (record_projection, load_waiting_events, record_call) -----------------------

PROJECTION_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=100),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
)
PROJECTION_TIMEOUT = timedelta(seconds=10)

# ---- the outbox (workflows/outbox/): send_chat ---------------------------------------------------

# A provider that is down for a while is waited for (its messages keep their order); after a
# day the message is given up on and marked failed, with the last error.
CHAT_SEND_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    non_retryable_error_types=[errors.CHAT_REFUSED, errors.CHAT_NOT_CONFIGURED],
)
CHAT_SEND_TIMEOUT = timedelta(seconds=30)
CHAT_SEND_GIVE_UP = timedelta(days=1)
# A receipt (a reaction on the human's message, or a short reply) is worth little once late; it
# must not hold the agent's answers back for long.
CHAT_RECEIPT_GIVE_UP = timedelta(minutes=10)

# ---- a phone call (workflows/call/) -------------------------------------------------------------

# A speech provider is tried this many times before the next in the chain is.
SPEECH_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=2),
    maximum_attempts=3,
    non_retryable_error_types=[errors.SPEECH_PROVIDER_UNAVAILABLE, errors.AUDIO_MISSING],
)
# Speech runs as local activities, in the worker that runs the call: a turn saves two round
# trips through the server, and the audio is written where the call's worker can read it.
SPEECH_TIMEOUT = timedelta(seconds=60)
CALL_SYSTEM_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=5,
    non_retryable_error_types=[errors.CALL_REFUSED],
)
CALL_SYSTEM_TIMEOUT = timedelta(seconds=30)
# The message of a call nobody answered, sent another way (an SMS, the local inbox): like a
# projection write, it waits for as long as it takes.
CALL_FALLBACK_RETRY = PROJECTION_RETRY
CALL_FALLBACK_TIMEOUT = timedelta(seconds=30)
# A full mailbox empties as the agent reads; a call's answer for it waits meanwhile.
CALL_ANSWER_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=60)
)
CALL_ANSWER_TIMEOUT = timedelta(seconds=30)

# Checking the deployment's tag on a call's input or a line event: a local HMAC, so a failure
# is the worker's, tried again briefly; a tag that does not check out is not retried.
TRUST_CHECK_RETRY = RetryPolicy(maximum_attempts=3, non_retryable_error_types=[errors.NOT_SIGNED])
TRUST_CHECK_TIMEOUT = timedelta(seconds=5)

# ---- the mailbox (workflows/mailbox/) ------------------------------------------------------------

MAILBOX_DELIVERY_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=2),
    maximum_attempts=3,
    # A missing pane is the workflow's business (it waits and marks the agent unreachable).
    non_retryable_error_types=[errors.PANE_NOT_FOUND, errors.INVALID_TARGET],
)
MAILBOX_DELIVERY_TIMEOUT = timedelta(seconds=30)  # deliver_to_pane, a message or a backlog
MAILBOX_INTERRUPT_TIMEOUT = timedelta(seconds=10)  # interrupt_pane, with the delivery's retries
# A tag check is a computation: if it cannot run, the request it checks is ignored.
MAILBOX_CHECK_RETRY = RetryPolicy(maximum_attempts=3)
MAILBOX_CHECK_TIMEOUT = timedelta(seconds=10)
# queue_receipt: a late receipt is worth little; it must not hold the next message back long.
MAILBOX_RECEIPT_RETRY = PROJECTION_RETRY
MAILBOX_RECEIPT_TIMEOUT = timedelta(seconds=10)
MAILBOX_RECEIPT_GIVE_UP = timedelta(seconds=30)
# The mailbox's own projection writes: tried once and briefly, since a local activity holds the
# workflow task (and every signal that arrives) open; the mailbox keeps a failed write and tries it
# again after a backoff of its own (workflows/mailbox/projection.py), so typing goes on.
MAILBOX_RECORD_RETRY = RetryPolicy(maximum_attempts=1)
MAILBOX_RECORD_TIMEOUT = timedelta(seconds=2)

# ---- approvals ----------------------------------------------------------------------------------
# A decided approval stays open this long to hear the answers that raced it (a second approver,
# the agent's own dialog), tell each it came late and keep it in the history.
APPROVAL_LATE_ANSWERS = timedelta(minutes=5)
# A ladder's rung (an SMS, a call placed): a rung that fails for now is tried again for a few
# minutes, then recorded as failed and the ladder climbs on; one that cannot be used is skipped.
ESCALATION_RUNG_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=8,
    non_retryable_error_types=[errors.NOT_SIGNED],
)
ESCALATION_RUNG_TIMEOUT = timedelta(seconds=30)
# A call rung that finds the human's phone on another call asks again this often: the human
# hears this request on that call (which carries every request the phone may answer) or, once it
# ends with this one still open, on a call of its own.
ESCALATION_LINE_BUSY_RECHECK = timedelta(seconds=5)
