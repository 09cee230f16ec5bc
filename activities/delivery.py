"""Typing into an agent's pane and interrupting it: the pane activities, for the deployment only.

Every door to a pane is here. They run only as local activities of the agent's own mailbox: a
workflow anyone else starts, or an activity anyone schedules on a host's task queue, is refused
(Temporal itself authenticates no one). Within the mailbox, each request is checked again where it
is typed, because anyone who reaches Temporal can signal a mailbox and a history can be altered:

- Every event must carry the deployment's tag (:mod:`agentcomms.trust`) and belong to the mailbox
  that asks; one that does not is answered ``rejected``, never typed, and the others go on.
- The pane's registration must carry the deployment's tag too; one that does not is refused as
  ``RegistrationNotSigned``: the pane it names is not the agent's, so its messages wait, as for a
  missing pane, until the agent is registered again.
- What is typed (the text, the pane, the event id, the cap, the submit delay) is derived from the
  event and registration so checked, never taken from a field beside them.
- An unregister, and each report of the agent's hooks, is checked here before the mailbox obeys
  it, so nobody but the deployment can take an agent offline or make it look ready.

Bridge errors become the ``ApplicationError`` types the mailbox branches on (names in
:mod:`agentcomms.errors`): a missing pane and a tmux hiccup are retryable (the pane may come back;
the mailbox decides how long to wait), a target or key that can never work is not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities.process import ProcessDoor
from agentcomms import errors, metrics
from agentcomms.agents.state import HookReport
from agentcomms.bridge import TmuxAdapter, adapter_for, sanitize
from agentcomms.bridge.prompt import follow_up
from agentcomms.errors import InvalidTarget, PaneNotFound, PaneNotReady, TmuxError
from agentcomms.framing import framed
from agentcomms.models import (
    DeliverRequest,
    DeliveryOutcome,
    Event,
    FollowUpLook,
    FollowUpRequest,
    InterruptRequest,
    Keypress,
    PaneLook,
    PaneTarget,
    Registration,
    Typing,
    Unregister,
    utcnow,
)
from agentcomms.store import PROJECTION_UNAVAILABLE, Store
from agentcomms.trust import DeploymentKey
from agentcomms.workflow_ids import MAILBOX_WORKFLOW, agent_of_mailbox

# A pane agent's endpoint; a process agent's messages go through its ProcessDoor instead.
_ENDPOINT_KIND = "tmux"
# The mailbox remembers the last 2,000 event ids and the pane about 1,000: a genuine event
# signalled again once both have forgotten it (a copy taken from an old history) would be typed
# twice. The projection remembers every delivery; it is asked about events older than this, which
# only a backlog or such a copy brings, so a message that comes and goes costs no read.
ASK_THE_PROJECTION_AFTER = timedelta(minutes=5)
# How long a delivery waits to record what it typed: the mailbox writes the rows the projection
# could not take, so a locked database must not hold the typing up for its busy timeout.
RECORD_WAIT = timedelta(seconds=1)


class PaneActivities:
    def __init__(
        self, key: DeploymentKey, store: Store, *, process: ProcessDoor | None = None
    ) -> None:
        self._key = key
        self._store = store
        # This host's process agents (ACP): prompted, not typed, once the same tags check out.
        self._process = process

    @activity.defn(name="deliver_to_pane")
    async def deliver_to_pane(self, req: DeliverRequest) -> list[DeliveryOutcome]:
        """Type the mailbox's messages into their pane, in order: those whose tags check out,
        in as few tmux clients as can carry them; the others are answered as rejected. Answers
        for the first messages, in order, as many as it got through (a failure on the first is
        raised; the mailbox sends the rest again)."""
        agent_id = _asking_mailbox()
        pane = await self._current_pane(agent_id, req.registration, req.events[0].id)
        if req.registration.type == "process":
            return await self._prompt(agent_id, req)
        answers: list[DeliveryOutcome | None] = []  # None: to be typed
        to_type: list[Typing] = []
        for event in req.events:
            if not self._event_is_genuine(agent_id, event):
                answers.append(
                    DeliveryOutcome(
                        event_id=event.id, typed=False, rejected=errors.NOT_SIGNED_SENTENCE
                    )
                )
            elif await self._typed_before(event):
                answers.append(DeliveryOutcome(event_id=event.id, typed=False))
            else:
                answers.append(None)
                to_type.append(_typing(event, req.registration, pane, look=req.look))
        typed: list[DeliveryOutcome] = []
        if to_type:
            try:
                typed = await (_typed_together(to_type) if req.together else _typed(to_type))
            except ApplicationError:
                if answers[0] is None:
                    raise
                # Those answered before it stand; the mailbox meets the failure again next.
        typed_in_order = iter(typed)
        outcomes: list[DeliveryOutcome] = []
        for answer in answers:
            answer = answer or next(typed_in_order, None)
            if answer is None:
                break
            outcomes.append(answer)
        await self._record(req, outcomes)
        if req.hold_ms and outcomes:
            await asyncio.sleep(req.hold_ms / 1000)  # the burst's next messages join this task
        return outcomes

    @activity.defn(name="interrupt_pane")
    async def interrupt_pane(self, req: InterruptRequest) -> bool:
        """Press the agent's interrupt key, once the deployment's tags check out; False when
        this event's key was pressed already."""
        agent_id = _asking_mailbox()
        pane = await self._current_pane(agent_id, req.registration, req.event.id)
        if not self._event_is_genuine(agent_id, req.event):
            raise ApplicationError(  # logged in one line by _event_is_genuine
                errors.NOT_SIGNED_SENTENCE,
                type=errors.NOT_SIGNED,
                non_retryable=True,
                category=ApplicationErrorCategory.BENIGN,
            )
        if await self._typed_before(req.event):
            return False
        if req.registration.type == "process":
            # A /clear: an interrupt that leaves the agent's session for a new one (signed).
            new_session = req.event.payload.get("new_session") is True
            return await self._door().interrupt(agent_id, req.registration, new_session=new_session)
        keypress = Keypress(pane=pane, event_id=req.event.id, key=req.registration.interrupt_key)
        with _as_application_errors():
            return await adapter_for(_ENDPOINT_KIND).interrupt(keypress)

    @activity.defn(name="check_registration")
    async def check_registration(self, registration: Registration) -> bool:
        """True when the deployment registered this pane for this mailbox's agent (the tag checks
        out): only then does the mailbox take it. Otherwise ``RegistrationNotSigned`` says why."""
        agent_id = _asking_mailbox()
        await self._current_pane(agent_id, registration, "nothing")
        if registration.type == "process":
            self._door().registered(agent_id, registration)
        return True

    @activity.defn(name="follow_up_prompt")
    async def follow_up_prompt(self, req: FollowUpRequest) -> FollowUpLook:
        """Look at the input box for a prompt no UserPromptSubmit carried, and press Enter once
        more if it is still there: only for messages this pane's record shows typed."""
        agent_id = _asking_mailbox()
        first = req.event_ids[0]
        pane = await self._current_pane(agent_id, req.registration, first)
        if req.registration.type == "process":
            return FollowUpLook(in_box=False)  # a prompt has no input box to stay in
        adapter = adapter_for(_ENDPOINT_KIND)
        assert isinstance(adapter, TmuxAdapter)
        with _as_application_errors():
            if not (await adapter.pane_info(pane)).has_seen(first):
                return FollowUpLook(in_box=False)  # not typed by us: nothing to press for
            in_box, pressed = await follow_up(adapter, pane, first, req.needle, press=req.press)
        if pressed:
            activity.logger.info("pressed Enter again for %s in %s", first, pane.target)
        return FollowUpLook(in_box=in_box, pressed=pressed)

    @activity.defn(name="check_unregister")
    async def check_unregister(self, request: Unregister) -> bool:
        """Whether the deployment asked to unregister this mailbox's agent (the tag checks out)."""
        agent_id = _asking_mailbox()
        if self._key.unregister_is_genuine(agent_id, request):
            if self._process is not None:
                await self._process.unregistered(agent_id)
            return True
        activity.logger.warning(
            "ignored an unregister of %s: not signed by this deployment (it stays registered)",
            agent_id,
        )
        return False

    @activity.defn(name="check_report")
    async def check_report(self, report: HookReport) -> bool:
        """Whether the gateway signed this report of the mailbox's agent's hooks: a forged
        "ready" would have messages typed into a dialog, a forged "busy" would hold them."""
        agent_id = _asking_mailbox()
        if self._key.report_is_genuine(agent_id, report):
            return True
        activity.logger.warning(
            "ignored a %s hook report of %s: not signed by this deployment", report.event, agent_id
        )
        return False

    async def _prompt(self, agent_id: str, req: DeliverRequest) -> list[DeliveryOutcome]:
        """A process agent's messages, checked as a pane's are, go as one ACP prompt."""
        refused: dict[str, DeliveryOutcome] = {}
        to_prompt: list[Event] = []
        for event in req.events:
            if not self._event_is_genuine(agent_id, event):
                rejected = errors.NOT_SIGNED_SENTENCE
                refused[event.id] = DeliveryOutcome(
                    event_id=event.id, typed=False, rejected=rejected
                )
            elif await self._typed_before(event):
                refused[event.id] = DeliveryOutcome(event_id=event.id, typed=False)
            else:
                to_prompt.append(event)
        prompted = await self._door().deliver(agent_id, req.registration, to_prompt)
        by_id = {o.event_id: o for o in prompted} | refused
        outcomes = [by_id[e.id] for e in req.events]
        await self._record(req, outcomes)
        return outcomes

    def _door(self) -> ProcessDoor:
        if self._process is None:
            raise ApplicationError(
                "this worker runs no process agents (it was built without them)",
                type=errors.PANE_NOT_FOUND,
            )
        return self._process

    async def _current_pane(
        self, agent_id: str, registration: Registration, event_id: str
    ) -> PaneTarget:
        """The pane of a registration the deployment signed for this agent and has not since
        replaced: a mailbox's state can be forged (a workflow of anyone's continues-as-new into
        it) and hold a genuine registration of the pane the agent left, now a shell."""
        pane = self._checked_pane(agent_id, registration, event_id)
        try:
            newest = await self._store.newest_pane_signed(agent_id)
        except PROJECTION_UNAVAILABLE as exc:
            # The mailbox's own newest-only rule still stands; a hiccup must not stop typing.
            activity.logger.warning(
                "could not ask the projection about %s's pane: %s", agent_id, exc
            )
            return pane
        made = registration.registered_at
        assert made is not None  # checked with the tag
        if newest is None or _utc(made) >= _utc(newest):
            return pane
        activity.logger.warning(
            "refused to type %s into %s: the registration of %s was made at %s, before its "
            "newest registration or unregister (%s)",
            event_id,
            registration.target,
            agent_id,
            made.isoformat(),
            _utc(newest).isoformat(),
        )
        raise ApplicationError(
            f"its pane's registration (made at {made.isoformat(timespec='seconds')}) was "
            f"replaced at {_utc(newest).isoformat(timespec='seconds')}: register {agent_id} again "
            "(`agentcomms agents register`) if this is not the pane it has now",
            type=errors.REGISTRATION_NOT_SIGNED,
            non_retryable=True,
            category=ApplicationErrorCategory.BENIGN,
        )

    def _checked_pane(self, agent_id: str, registration: Registration, event_id: str) -> PaneTarget:
        if not self._key.registration_is_genuine(agent_id, registration):
            activity.logger.warning(
                "refused to type %s: the registration of %s %s",
                event_id,
                agent_id,
                _unsigned_registration(registration),
            )
            raise ApplicationError(
                f"its pane's registration {_unsigned_registration(registration)}: register "
                f"{agent_id} again (`agentcomms agents register`), or, if this host's worker has "
                "a security.deployment_key of its own, give it the deployment's",
                type=errors.REGISTRATION_NOT_SIGNED,
                non_retryable=True,
                # Said above in one line: the SDK's "Completing activity as failed" with a
                # traceback, for every message of the pane at every try, would only bury it.
                category=ApplicationErrorCategory.BENIGN,
            )
        return PaneTarget(target=registration.target, socket=registration.socket)

    def _event_is_genuine(self, agent_id: str, event: Event) -> bool:
        # Whose mailbox asks: an event signed for one agent must not be typed for another.
        if event.agent_id == agent_id and self._key.event_is_genuine(event):
            return True
        activity.logger.warning(
            "refused %s for %s: not signed by this deployment", event.id, agent_id
        )
        return False

    async def _typed_before(self, event: Event) -> bool:
        """Whether the projection shows this (old) event typed already: then it is not again."""
        if utcnow() - event.created_at < ASK_THE_PROJECTION_AFTER:
            return False
        try:
            stored = await self._store.get_event(event.id)
        except PROJECTION_UNAVAILABLE as exc:
            # The pane's own record still stands guard; a projection hiccup must not fail it.
            activity.logger.warning("could not ask the projection about %s: %s", event.id, exc)
            return False
        if stored is None or stored.status != "delivered" or stored.agent_id != event.agent_id:
            return False
        activity.logger.warning(
            "%s was typed on %s already (a copy signalled again?): not typed twice",
            event.id,
            stored.delivered_at,
        )
        return True

    async def _record(self, req: DeliverRequest, outcomes: list[DeliveryOutcome]) -> None:
        """Write the typed events the mailbox asked to have recorded (`settled`) to the
        projection, and mark their outcomes recorded; when the projection cannot take them now,
        the mailbox writes them later: typing never waits for the projection, nor looks failed
        for its sake."""
        if not req.settled:
            return
        now = utcnow()
        asked = [
            (outcome, settled.model_copy(
                update={"delivered_at": now, "note": outcome.cut_note(req.registration.max_chars)}
            ))
            for outcome, settled in zip(outcomes, req.settled, strict=False)
            if outcome.rejected is None and settled.id == outcome.event_id
        ]  # fmt: skip
        if not asked:
            return
        events = [event for _, event in asked]
        try:
            async with asyncio.timeout(RECORD_WAIT.total_seconds()):
                await self._store.settle_events(events)
        except (*PROJECTION_UNAVAILABLE, TimeoutError) as exc:
            activity.logger.warning("%s typed; the mailbox will record it: %s", events[0].id, exc)
            return
        metrics.settled(events)
        for outcome, _ in asked:
            outcome.recorded = True


def _asking_mailbox() -> str:
    """The agent whose mailbox runs this activity; refused for any other caller."""
    info = activity.info()
    agent_id = agent_of_mailbox(info.workflow_id or "")
    if not info.is_local or info.workflow_type != MAILBOX_WORKFLOW or agent_id is None:
        activity.logger.warning(
            "refused %s for %s (%s, %s): pane activities run only inside an agent's mailbox",
            info.activity_type,
            info.workflow_id,
            info.workflow_type,
            "local" if info.is_local else "scheduled on the task queue",
        )
        raise ApplicationError(
            f"{info.activity_type} runs only as a local activity of an agent's mailbox",
            type=errors.NOT_A_MAILBOX,
            non_retryable=True,
        )
    return agent_id


def _utc(moment: datetime) -> datetime:
    # The projection may hand a time back without its zone; it wrote it in UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _unsigned_registration(registration: Registration) -> str:
    """Why a registration's tag does not check out, as the agent's last error says it."""
    if not registration.id or registration.registered_at is None:
        return "was made before registrations carried an id and a time"
    return "is not signed by this deployment"


def _typing(
    event: Event, registration: Registration, pane: PaneTarget, *, look: PaneLook
) -> Typing:
    text, framing = framed(event)
    return Typing(
        pane=pane,
        event_id=event.id,
        text=text,
        submit_delay_ms=registration.submit_delay_ms,
        # The agent's cap bounds the sender's words; the header and the gutters come on top,
        # so a message within the cap is typed whole, and a cut one says how much of it was cut.
        max_chars=registration.max_chars + framing,
        look=look,
    )


async def _typed_together(typings: list[Typing]) -> list[DeliveryOutcome]:
    """Type the texts as one prompt, each with its header, oldest first: an agent that was busy
    reads what waited in one turn instead of one turn each."""
    if len(typings) == 1:
        return await _typed(typings)
    cleaned = [sanitize(t.text, max_chars=t.max_chars) for t in typings]
    kept = [(t, c) for t, c in zip(typings, cleaned, strict=True) if c.text]
    if not kept:
        return await _typed(typings)  # nothing to type: each is only recorded
    first = kept[0][0]
    text = "\n".join(c.text for _, c in kept)
    together = first.model_copy(
        update={
            "text": text,
            "max_chars": len(text),  # each text was cut at the cap already
            "also_ids": [t.event_id for t, _ in kept[1:]],
        }
    )
    [outcome] = await _typed([together])
    by_id = {t.event_id: c for t, c in kept}
    return [
        DeliveryOutcome(
            event_id=t.event_id,
            typed=outcome.typed and t.event_id in by_id,
            truncated=c.truncated,
            chars=len(c.text),
            removed=c.removed,
        )
        for t, c in zip(typings, cleaned, strict=True)
    ]


async def _typed(typings: list[Typing]) -> list[DeliveryOutcome]:
    adapter = adapter_for(_ENDPOINT_KIND)
    with _as_application_errors():
        if len(typings) == 1:
            outcomes = [await adapter.deliver(typings[0])]
        else:
            outcomes = await adapter.deliver_batch(typings)
    activity.logger.info(
        "delivered %d of %d to %s: typed %d, found typed %d",
        len(outcomes),
        len(typings),
        typings[0].pane.target,
        sum(o.typed for o in outcomes),
        sum(not o.typed for o in outcomes),
    )
    return outcomes


@contextmanager
def _as_application_errors() -> Iterator[None]:
    """Translate bridge errors into the ApplicationError types the mailbox branches on.

    A pane that is missing or not ready is the mailbox's everyday business, not a fault: its
    messages wait, `agents` says why, and the mailbox looks again (a missing pane every half
    minute at most, for as long as it is gone). Said here in one line, not with the SDK's traceback at
    every look."""
    try:
        yield
    except PaneNotFound as exc:
        activity.logger.info("%s: its messages wait until it is there", exc)
        raise ApplicationError(
            str(exc), type=errors.PANE_NOT_FOUND, category=ApplicationErrorCategory.BENIGN
        ) from exc
    except PaneNotReady as exc:
        # Nothing typed; the mailbox waits for the agent (its hooks, or another look).
        activity.logger.debug("%s: not typed now", exc)
        raise ApplicationError(
            str(exc),
            exc.reason,
            type=errors.PANE_NOT_READY,
            non_retryable=True,
            category=ApplicationErrorCategory.BENIGN,
        ) from exc
    except InvalidTarget as exc:
        raise ApplicationError(str(exc), type=errors.INVALID_TARGET, non_retryable=True) from exc
    except TmuxError as exc:
        raise ApplicationError(str(exc), type=errors.TMUX_FAILED) from exc
