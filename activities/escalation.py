"""A ladder's rungs: what reaching the human by chat, SMS, push notification or call does, for
the deployment only.

``fire_rung`` runs only as a local activity of the request's own workflow, on a ladder the
gateway signed, started when the gateway opened it: anyone else's workflow, an altered ladder or
a copy started again later (or again at once, in another run: each rung fires in one run, as
the projection records) texts and rings nobody. What it sends and where come from the signed
ladder and the config (the human's number is the config's, never the request's). A rung the
config cannot serve (no SMS set up, no chat mapped, a phone that is not one of the agent's
approvers) is skipped, with the reason, for `trace`. A call rung claims the human's phone in the
projection first: while another call is up on it, the rung places nothing and says which call
holds it, for the ladder to wait.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError
from ulid import ULID

from agentcomms import errors
from agentcomms.config import Config
from agentcomms.config.voice import LOCAL_PHONE, phone_approver
from agentcomms.errors import ConfigError, SendRefused
from agentcomms.escalation_models import (
    AnswerCheck,
    Escalation,
    EscalationAnswered,
    RungResult,
    RungStep,
)
from agentcomms.models import CallRecord, utcnow
from agentcomms.store import PROJECTION_UNAVAILABLE, Store
from agentcomms.trust import DeploymentKey
from agentcomms.voice.callsystem import call_system
from agentcomms.voice.models import (
    WITHDRAWN_ANSWERED,
    WITHDRAWN_TIMED_OUT,
    CallInput,
    LineEvent,
)
from agentcomms.voice.stt import stt_chain
from agentcomms.voice.tts import tts_chain
from agentcomms.workflow_ids import (
    APPROVAL_WORKFLOW,
    ESCALATION_WORKFLOW,
    approval_workflow_id,
    escalation_workflow_id,
)

# How long after the gateway opened a request its workflow may start: a genuine ladder copied
# from an old history and started again later (a replay) reaches nobody.
LADDER_START_WINDOW = timedelta(minutes=10)
# Past its ring timeout and longest duration, a call the projection still shows up (its worker
# died before it wrote the end) no longer keeps a ladder's call from the human's phone.
LINE_HELD_SLACK = timedelta(minutes=2)


def sms_text(escalation: Escalation) -> str:
    """The SMS of a rung: the request, and for a request how to answer it by reply."""
    if escalation.reply is None:
        return escalation.text
    return f"{escalation.text}\n{escalation.reply}"


# Where a request too long for one notification is read whole.
CUT = " […] (the whole: `agentcomms approvals`, or the console)"


def push_text(escalation: Escalation) -> str:
    """The urgent notification of a rung: the request, and for a request where to answer it (a
    notification takes no reply)."""
    if escalation.kind != "approval":
        return escalation.text
    return (
        f"{escalation.text}\nAnswer {escalation.subject_id} with the buttons of its "
        "notification, in the agent's chats, with `agentcomms approvals`, or in the console."
    )


def call_text(escalation: Escalation) -> str:
    """What a call rung says first: the request, and for a request the keys."""
    if escalation.keys is None:
        return escalation.text
    text = escalation.text
    return f"{text if text.endswith(('.', '?', '!')) else text + '.'} {escalation.keys}"


class EscalationActivities:
    def __init__(self, cfg: Config, key: DeploymentKey, store: Store) -> None:
        self._cfg = cfg
        self._key = key
        self._store = store

    @activity.defn(name="fire_rung")
    async def fire_rung(self, step: RungStep) -> RungResult:
        """Reach the human by the rung's way (or say why it cannot); a call rung hands back the
        signed call for the workflow to place."""
        escalation = self._signed(step)
        await self._first_to_fire(escalation, step.rung)
        via = escalation.rungs[step.rung].via
        if via == "chat":
            return self._chat(escalation)
        if via == "sms":
            return await self._sms(escalation)
        if via == "push":
            return await self._push(escalation)
        return await self._call(escalation, step)

    def _chat(self, escalation: Escalation) -> RungResult:
        chats = sorted(
            channel
            for channel, agent in self._cfg.chat.channels.items()
            if agent == escalation.agent_id
        )
        if not chats:
            return RungResult(
                fired=False,
                detail=f"skipped: no chat is mapped to {escalation.agent_id} (chat.channels)",
            )
        return RungResult(fired=True, detail="in the agent's chats: " + ", ".join(chats))

    async def _sms(self, escalation: Escalation) -> RungResult:
        number = self._cfg.voice.phone.to_number
        sms = self._cfg.chat.sms
        if not (number and sms.enabled and sms.from_number and not sms.missing_credentials()):
            return RungResult(
                fired=False,
                detail="skipped: no SMS set up (chat.sms with its Twilio account and "
                "from_number, and the human's number in voice.phone.to_number)",
            )
        from agentcomms.transports import send_pieces
        from agentcomms.transports.sms import sender

        try:
            await send_pieces(sender(self._cfg), number, sms_text(escalation))
        except SendRefused as exc:  # for good: the next rung still comes
            return RungResult(fired=False, detail=f"skipped: the SMS was refused: {exc}")
        return RungResult(fired=True, detail=f"SMS to {number}")

    async def _push(self, escalation: Escalation) -> RungResult:
        """An urgent notification to the human's ntfy topic: on a phone it sounds through
        do-not-disturb. A request's buttons are in the notification its chat rung posted (where
        the topic is one of the agent's chats); this one says where to answer."""
        ntfy = self._cfg.chat.ntfy
        if not (ntfy.enabled and ntfy.topic):
            return RungResult(
                fired=False,
                detail="skipped: no push notifications set up (chat.ntfy with its topic)",
            )
        from agentcomms.transports import first_part
        from agentcomms.transports.ntfy import MAX_TEXT, URGENT, Notification, NtfySender

        note = Notification(
            # One notification, whatever the request's length (ntfy takes 4,096 bytes).
            message=first_part(push_text(escalation), MAX_TEXT - len(CUT), CUT),
            title=f"{escalation.agent_id} needs you",
            priority=URGENT,
            tags=("rotating_light",),
        )
        try:
            await NtfySender(self._cfg).publish(ntfy.topic, note)
        except SendRefused as exc:  # for good: the next rung still comes
            return RungResult(fired=False, detail=f"skipped: ntfy refused it: {exc}")
        return RungResult(fired=True, detail=f"urgent notification to ntfy:{ntfy.topic}")

    async def _call(self, escalation: Escalation, step: RungStep) -> RungResult:
        try:
            system, number = call_system(self._cfg)
        except ConfigError as exc:
            return RungResult(fired=False, detail=f"skipped: {exc}")
        phone = number or LOCAL_PHONE
        agent_id = escalation.agent_id
        if escalation.kind == "approval" and not self._cfg.phone_hears(agent_id, phone):
            # The call would say the request to whoever answers that phone, and take its keys.
            return RungResult(
                fired=False,
                detail=f"skipped: {phone} is not one of {agent_id}'s approvers (add "
                f'"{phone_approver(phone)}" to agents.{agent_id}.approvers for its requests '
                "to ring it)",
            )
        voice = self._cfg.voice
        digest = hashlib.sha256(
            f"agentcomms/rung/v1\0{escalation.kind}\0{escalation.subject_id}\0{step.rung}".encode()
        ).digest()
        call_id = f"c_{ULID.from_bytes(digest[:16])}"  # the same call however often it is tried
        call = self._key.sign_call(
            CallInput(
                call_id=call_id,
                agent_id=escalation.agent_id,
                message=call_text(escalation),
                system=system,
                to_number=number,
                tts=tts_chain(self._cfg),
                stt=stt_chain(self._cfg),
                ring_timeout_s=voice.ring_timeout_s,
                transcript_timeout_s=voice.transcript_timeout_s,
                max_duration_s=voice.max_call_duration_s,
                # The ladder's earlier rungs left the request where the human sees it.
                fallback=False,
                # An urgent message's call: what the human says goes to the agent. A request's
                # answer decides it instead (gateway/approvals/phone.py).
                notify_mailbox=escalation.kind == "message",
                approval_id=escalation.subject_id if escalation.kind == "approval" else None,
                several_keys=escalation.several_keys,
                placed_at=step.now,
            )
        )
        busy = await self._claim_line(call, step)
        if busy is not None:
            return RungResult(
                fired=False, detail=f"waiting: the phone is on call {busy}", line_busy=busy
            )
        where = f"{number}" if number else "the local phone (agentcomms phone)"
        # Signed for this call alone: once the request is answered (or the human wrote to the
        # agent), its ladder hangs the call up with it.
        withdraw = self._key.sign_line_event(
            call_id, LineEvent(kind="withdrawn", detail=WITHDRAWN_ANSWERED)
        )
        timed_out = None
        if escalation.kind == "approval":  # only a request times out
            timed_out = self._key.sign_line_event(
                call_id, LineEvent(kind="withdrawn", detail=WITHDRAWN_TIMED_OUT)
            )
        return RungResult(
            fired=True,
            detail=f"call {call_id} to {where}",
            call=call,
            withdraw=withdraw,
            withdraw_timed_out=timed_out,
        )

    async def _claim_line(self, call: CallInput, step: RungStep) -> str | None:
        """The call in progress on the human's phone, when there is one (this rung's call then
        waits for it); otherwise the phone is this call's, as the projection records at once."""
        voice = self._cfg.voice
        held_at_most = (
            timedelta(seconds=voice.ring_timeout_s + voice.max_call_duration_s) + LINE_HELD_SLACK
        )
        placeholder = CallRecord(
            id=call.call_id,
            agent_id=call.agent_id,
            status="dialing",
            # As the call's workflow records it, so calls agents place count too.
            phone_number=call.to_number or call.system,
            started_at=step.now,
        )
        try:
            return await self._store.claim_line(placeholder, since=step.now - held_at_most)
        except PROJECTION_UNAVAILABLE as exc:
            # A projection hiccup must not keep the human away: at worst the phone rings twice.
            activity.logger.warning(
                "could not ask the projection whether the phone is free: %s", exc
            )
            return None

    @activity.defn(name="check_escalation_answered")
    async def check_escalation_answered(self, check: AnswerCheck) -> EscalationAnswered:
        """The `answered` signalled to an urgent message's ladder, once the gateway's tag on it
        checks out: the gateway heard the human write to this agent after the ladder opened.
        Anyone else's (a raw Temporal client's, or a genuine one copied from an older ladder)
        is refused, and the ladder climbs on."""
        escalation = self._own(check.escalation)
        answered = check.answered
        if not self._key.escalation_answered_is_genuine(escalation.agent_id, answered):
            raise _refused(
                f"this answer to {escalation.agent_id}'s urgent message is not signed by this "
                "deployment: it did not come from the gateway, so the ladder climbs on",
                errors.NOT_SIGNED,
            )
        if answered.at < escalation.opened_at:
            raise _refused(
                f"this answer to {escalation.agent_id}'s urgent message was heard at "
                f"{answered.at}, before its ladder opened at {escalation.opened_at}: a copy "
                "from an older ladder, which stops nothing",
                errors.NOT_SIGNED,
            )
        return answered

    def _signed(self, step: RungStep) -> Escalation:
        """The ladder, asked by its request's own workflow and signed by the deployment when it
        opened the request; refused otherwise."""
        escalation = self._own(step.escalation)
        if abs(step.started_at - escalation.opened_at) > LADDER_START_WINDOW:
            raise _refused(
                f"the ladder of {escalation.kind} {escalation.subject_id} was opened at "
                f"{escalation.opened_at} but started at {step.started_at}: a copy, which "
                "reaches nobody",
                errors.NOT_SIGNED,
            )
        if not 0 <= step.rung < len(escalation.rungs):
            raise _refused(f"the ladder has no rung {step.rung + 1}", errors.NOT_A_LADDER)
        return escalation

    async def _first_to_fire(self, escalation: Escalation, rung: int) -> None:
        """Each rung of a ladder fires in one run, the first to ask (its own retries ask again):
        a genuine ladder copied from a history and started again within its window, in the
        request's workflow terminated and started afresh, texts and rings nobody again."""
        run = activity.info().workflow_run_id or ""
        which = f"{escalation.kind}:{escalation.subject_id}:{rung}"
        try:
            first = await self._store.spend("rung", which, run, utcnow())
        except PROJECTION_UNAVAILABLE as exc:
            # The window still bounds a copy; a projection hiccup must not keep the human away.
            activity.logger.warning("could not ask the projection about rung %s: %s", which, exc)
            return
        if first != run:
            raise _refused(
                f"rung {rung + 1} of the ladder of {escalation.kind} {escalation.subject_id} "
                f"fired already, in run {first}: a copy started again reaches nobody",
                errors.NOT_SIGNED,
            )

    def _own(self, escalation: Escalation) -> Escalation:
        """The ladder, when this runs as a local activity of its own workflow and the
        deployment signed it; refused otherwise."""
        info = activity.info()
        if escalation.kind == "approval":
            own_type, own_id = APPROVAL_WORKFLOW, approval_workflow_id(escalation.subject_id)
        else:
            own_type, own_id = ESCALATION_WORKFLOW, escalation_workflow_id(escalation.agent_id)
        own = info.workflow_type == own_type and info.workflow_id == own_id
        if not (info.is_local and own):
            raise _refused(
                f"{info.activity_type} runs only as a local activity of {escalation.kind} "
                f"{escalation.subject_id}'s own workflow, not {info.workflow_id}",
                errors.NOT_A_LADDER,
            )
        if not self._key.escalation_is_genuine(escalation):
            raise _refused(
                f"the ladder of {escalation.kind} {escalation.subject_id} is not signed by this "
                "deployment (or was altered since): it texts and rings nobody",
                errors.NOT_SIGNED,
            )
        return escalation


def _refused(reason: str, kind: str) -> ApplicationError:
    activity.logger.warning("refused %s: %s", activity.info().activity_type, reason)
    return ApplicationError(reason, type=kind, non_retryable=True)
