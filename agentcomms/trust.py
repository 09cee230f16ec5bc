"""The deployment key: how a pane's host knows that agentcomms, and not just anyone, sent a message.

Temporal authenticates no one: whoever reaches its port can signal ``enqueue`` to ``agent-<id>``,
and typing into an agent's pane is running code as its owner. So the gateway (and any process
that posts or registers) tags every event and registration with an HMAC-SHA256 over a canonical
encoding of what it says, and the pane's host checks the tag where the text would be typed. The
key never enters a workflow: workflows carry the tag, which reveals nothing of the key.

The key is ``security.deployment_key`` in the config (``${VAR}``, so several hosts share one), or,
when none is configured, ``<home>/deployment.key``, generated 0600 at first start and read by
every process on the host.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from uuid import uuid4

from pydantic_core import to_jsonable_python

from agentcomms.agents.state import HookReport
from agentcomms.approval_models import ApprovalRequest, Decision
from agentcomms.config.home import agentcomms_home, private_secret
from agentcomms.config.models import SecurityConfig
from agentcomms.escalation_models import Escalation, EscalationAnswered
from agentcomms.models import Event, Registration, Unregister
from agentcomms.outbox_models import OutboxItem
from agentcomms.voice.models import CallInput, End, LineEvent, Say

KEY_FILENAME = "deployment.key"
Turn = TypeVar("Turn", Say, End)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def key_path() -> Path:
    return agentcomms_home() / KEY_FILENAME


class DeploymentKey:
    """Signs and verifies events and registrations; holds the key, never shows it."""

    def __init__(self, secret: bytes) -> None:
        if not secret:
            raise ValueError("an empty deployment key signs nothing")
        self._secret = secret

    def __repr__(self) -> str:
        return "DeploymentKey(***)"

    @classmethod
    def load(cls, security: SecurityConfig) -> DeploymentKey:
        """The configured key, else this host's key file (made at first start)."""
        if security.deployment_key is not None:
            return cls(security.deployment_key.get_secret_value().encode("utf-8"))
        return cls(private_secret(key_path(), "the deployment key").encode("ascii"))

    # ---- events ---------------------------------------------------------------------------------

    def sign_event(self, event: Event) -> Event:
        """The event with its tag: what the gateway hands to Temporal."""
        return event.model_copy(update={"signature": self._tag(_event_fields(event))})

    def event_is_genuine(self, event: Event) -> bool:
        return self._verify(_event_fields(event), event.signature)

    # ---- registrations --------------------------------------------------------------------------

    def sign_registration(self, agent_id: str, registration: Registration) -> Registration:
        """The registration with its tag, and a fresh id and the time when it has none yet: the
        mailbox obeys only the newest registration it was sent."""
        if not registration.id or registration.registered_at is None:
            registration = registration.model_copy(
                update={"id": uuid4().hex, "registered_at": datetime.now(UTC)}
            )
        tag = self._tag(_registration_fields(agent_id, registration))
        return registration.model_copy(update={"signature": tag})

    def registration_is_genuine(self, agent_id: str, registration: Registration) -> bool:
        if not registration.id or registration.registered_at is None:
            return False  # made before registrations carried their id and time: register again
        return self._verify(_registration_fields(agent_id, registration), registration.signature)

    # ---- unregistering --------------------------------------------------------------------------

    def sign_unregister(self, agent_id: str, request: Unregister) -> Unregister:
        tag = self._tag(_unregister_fields(agent_id, request))
        return request.model_copy(update={"signature": tag})

    def unregister_is_genuine(self, agent_id: str, request: Unregister) -> bool:
        if not request.id or request.requested_at is None:
            return False
        return self._verify(_unregister_fields(agent_id, request), request.signature)

    # ---- hook reports: what an agent's hooks said it does ----------------------------------------

    def sign_report(self, agent_id: str, report: HookReport) -> HookReport:
        return report.model_copy(update={"signature": self._tag(_report_fields(agent_id, report))})

    def report_is_genuine(self, agent_id: str, report: HookReport) -> bool:
        return self._verify(_report_fields(agent_id, report), report.signature)

    # ---- calls: what a call is asked, and what its line said ------------------------------------

    def sign_call(self, call: CallInput) -> CallInput:
        """The call's input with its tag: what the gateway starts a call with."""
        return call.model_copy(update={"signature": self._tag(_call_fields(call))})

    def call_is_genuine(self, call: CallInput) -> bool:
        return self._verify(_call_fields(call), call.signature)

    def sign_line_event(self, call_id: str, event: LineEvent) -> LineEvent:
        """What the phone or the call system said happened on one call's line, tagged."""
        return event.model_copy(update={"signature": self._tag(_line_fields(call_id, event))})

    def line_event_is_genuine(self, call_id: str, event: LineEvent) -> bool:
        return self._verify(_line_fields(call_id, event), event.signature)

    def sign_turn(self, call_id: str, turn: Turn) -> Turn:
        """The agent's words for one call (or its goodbye), with an id of their own, tagged."""
        if not turn.id:
            turn = turn.model_copy(update={"id": uuid4().hex})
        return turn.model_copy(update={"signature": self._tag(_turn_fields(call_id, turn))})

    def turn_is_genuine(self, call_id: str, turn: Say | End) -> bool:
        return bool(turn.id) and self._verify(_turn_fields(call_id, turn), turn.signature)

    # ---- outboxes: what an agent's outbox to one chat sends ------------------------------------

    def sign_outbox_item(self, agent_id: str, channel_id: str, item: OutboxItem) -> OutboxItem:
        tag = self._tag(_outbox_fields(agent_id, channel_id, item))
        return item.model_copy(update={"signature": tag})

    def outbox_item_is_genuine(self, agent_id: str, channel_id: str, item: OutboxItem) -> bool:
        return self._verify(_outbox_fields(agent_id, channel_id, item), item.signature)

    # ---- approvals: what the agent asked, and the human's answer to it -------------------------

    def sign_approval(self, request: ApprovalRequest) -> ApprovalRequest:
        """The request with its tag, and a nonce of its own when it has none yet: an answer
        binds to this request (:func:`request_digest`), never to another of the same id."""
        if not request.nonce:
            request = request.model_copy(update={"nonce": uuid4().hex})
        return request.model_copy(update={"signature": self._tag(_approval_fields(request))})

    def approval_is_genuine(self, request: ApprovalRequest) -> bool:
        return self._verify(_approval_fields(request), request.signature)

    def sign_decision(self, decision: Decision, request: ApprovalRequest) -> Decision:
        """The answer with its tag, bound to `request` (the one the person was shown)."""
        bound = decision.model_copy(update={"answers": request_digest(request)})
        return bound.model_copy(update={"signature": self._tag(_decision_fields(bound))})

    def decision_is_genuine(self, decision: Decision, request: ApprovalRequest) -> bool:
        """Whether the gateway signed this answer for `request` itself: not for another
        approval, nor for an earlier request that drew the same short id."""
        if decision.approval_id != request.id or decision.answers != request_digest(request):
            return False
        return self._verify(_decision_fields(decision), decision.signature)

    # ---- escalations: a request's ladder, whose rungs text and ring the human ------------------

    def sign_escalation(self, escalation: Escalation) -> Escalation:
        return escalation.model_copy(
            update={"signature": self._tag(_escalation_fields(escalation))}
        )

    def escalation_is_genuine(self, escalation: Escalation) -> bool:
        return self._verify(_escalation_fields(escalation), escalation.signature)

    def sign_escalation_answered(
        self, agent_id: str, answered: EscalationAnswered
    ) -> EscalationAnswered:
        """The human's answer to an agent's urgent message, for that agent's ladder alone."""
        tag = self._tag(_answered_fields(agent_id, answered))
        return answered.model_copy(update={"signature": tag})

    def escalation_answered_is_genuine(self, agent_id: str, answered: EscalationAnswered) -> bool:
        return self._verify(_answered_fields(agent_id, answered), answered.signature)

    # ---- the tag --------------------------------------------------------------------------------

    def derive(self, purpose: str) -> bytes:
        """A key of its own for `purpose`, the same in every process of the deployment and
        after every restart (e.g. the one that signs call audio URLs)."""
        return hmac.new(self._secret, f"agentcomms {purpose}".encode(), hashlib.sha256).digest()

    def _tag(self, fields: list[Any]) -> str:
        digest = hmac.new(self._secret, _canonical(fields), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def _verify(self, fields: list[Any], signature: str | None) -> bool:
        if not signature:
            return False
        return hmac.compare_digest(self._tag(fields), signature)


def _canonical(fields: list[Any]) -> bytes:
    # Sorted keys, no spaces, ASCII escapes: the same bytes whichever process encodes it, and
    # after any round trip through Temporal's JSON or the projection.
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _event_fields(event: Event) -> list[Any]:
    """Everything that decides what is typed, where and as whom; not what the mailbox changes
    as it goes (status, attempts, delivery time, error, note)."""
    return [
        "agentcomms-event/1",
        event.id,
        event.agent_id,
        event.channel_id,
        event.type,
        event.role,
        event.direction,
        event.source_agent_id,
        # As JSON sees it: a value the payload was built with (a datetime) reads back as text.
        to_jsonable_python(event.payload),
        _microseconds(event.created_at),
    ]


def _registration_fields(agent_id: str, r: Registration) -> list[Any]:
    # A process agent's command and folder are what its host runs: tagged too. A pane's tag is
    # as it was, so registrations made before process agents existed still check out.
    process = [r.command, r.cwd, r.new_session_if_lost] if r.type == "process" else []
    return [
        "agentcomms-registration/2",
        agent_id,
        r.type,
        r.target,
        r.socket,
        r.host,
        r.interrupt_key,
        r.submit_delay_ms,
        r.max_chars,
        r.id,
        _microseconds(r.registered_at) if r.registered_at is not None else None,
        *process,
    ]


def _unregister_fields(agent_id: str, r: Unregister) -> list[Any]:
    at = _microseconds(r.requested_at) if r.requested_at is not None else None
    return ["agentcomms-unregister/1", agent_id, r.id, at]


def _report_fields(agent_id: str, report: HookReport) -> list[Any]:
    # Bound to one agent: a genuine "ready" of one agent copied into another's mailbox is not its.
    return [
        "agentcomms-hook-report/1",
        agent_id,
        _as_read_back(report.model_dump(exclude={"signature"})),
    ]


def _microseconds(moment: datetime) -> int:
    # Not isoformat: the projection hands a time back in UTC, whatever offset it was made with.
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return (aware - _EPOCH) // timedelta(microseconds=1)


def _call_fields(call: CallInput) -> list[Any]:
    """All of the call's input: who is called about what, how, and for how long."""
    return ["agentcomms-call/1", _as_read_back(call.model_dump(exclude={"signature"}))]


def _line_fields(call_id: str, event: LineEvent) -> list[Any]:
    # Bound to one call: a genuine event copied into another call is not that call's.
    return [
        "agentcomms-line-event/1",
        call_id,
        _as_read_back(event.model_dump(exclude={"signature"})),
    ]


def _turn_fields(call_id: str, turn: Say | End) -> list[Any]:
    # Bound to one call, and to what it is: a goodbye is not words to say and listen after.
    kind = "say" if isinstance(turn, Say) else "end"
    fields = turn.model_dump(exclude={"signature"})
    return ["agentcomms-call-turn/1", call_id, kind, _as_read_back(fields)]


def _outbox_fields(agent_id: str, channel_id: str, item: OutboxItem) -> list[Any]:
    # The event's own fields, not its tag: what is settled is what was asked to be sent.
    return [
        "agentcomms-outbox-item/1",
        agent_id,
        channel_id,
        item.id,
        _as_read_back(item.send.model_dump()),
        _event_fields(item.event) if item.event is not None else None,
    ]


def _as_read_back(value: Any) -> Any:
    """A model's fields as they read back from JSON, whatever they were built with: a default
    of 30 for a float field comes back as 30.0, so whole numbers are written as integers."""
    plain = to_jsonable_python(value)
    if isinstance(plain, float) and plain.is_integer():
        return int(plain)
    if isinstance(plain, dict):
        return {k: _as_read_back(v) for k, v in plain.items()}
    if isinstance(plain, list):
        return [_as_read_back(v) for v in plain]
    return plain


def _approval_fields(request: ApprovalRequest) -> list[Any]:
    return ["agentcomms-approval/1", _as_read_back(request.model_dump(exclude={"signature"}))]


def request_digest(request: ApprovalRequest) -> str:
    """What an answer names as the request it answers: a digest of everything the request's
    tag covers (its agent, tool, input, options, nonce...). Not secret; the answer's tag binds it."""
    digest = hashlib.sha256(_canonical(_approval_fields(request))).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def _decision_fields(decision: Decision) -> list[Any]:
    # Not `at`: the workflow stamps it when it takes the answer, after the gateway signed it.
    fields = decision.model_dump(exclude={"signature", "at"})
    return ["agentcomms-decision/1", _as_read_back(fields)]


def _answered_fields(agent_id: str, answered: EscalationAnswered) -> list[Any]:
    # Bound to one agent: another agent's human answering does not stop this ladder.
    fields = answered.model_dump(exclude={"signature"})
    return ["agentcomms-escalation-answered/1", agent_id, _as_read_back(fields)]


def _escalation_fields(escalation: Escalation) -> list[Any]:
    fields = escalation.model_dump(exclude={"signature"}, by_alias=True)
    return ["agentcomms-escalation/1", _as_read_back(fields)]
