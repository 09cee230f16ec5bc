"""CallWorkflow itself: the run, the turns, the speech chain, the call system, the record.

What it is asked and answers is ``workflows/call/models.py``; the package's docstring tells the
call's life.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import workflows.call.activities as activities
    import workflows.call.call_system as call_system
    import workflows.call.outcomes as outcomes
    from agentcomms import errors, policies
    from agentcomms.models import CallRecord, CallStatus
    from agentcomms.search_attributes import AGENT_ID
    from agentcomms.voice.models import (
        WITHDRAWN_BY_THE_AGENT,
        AudioRef,
        CallUpdate,
        FallbackRequest,
        Line,
        LineEvent,
        LiveCall,
        SpeechRequest,
        TranscribeRequest,
        TurnRecord,
    )
    from agentcomms.workflow_ids import CALL_WORKFLOW
    from workflows.call.checks import CallRefused, checked_call, checked_line_event, checked_turn
    from workflows.call.models import CallInput, End, Ended, Say, TurnResult, WaitLine

# Past the ring timeout the call system says no-answer itself; our own timer is the backstop.
CALL_SYSTEM_RING_SLACK_S = 15.0
# How long after its audio ends a phone may take to say it played it.
PLAY_SLACK_S = 10.0
# Marks the runs whose `end` stops a call still ringing at once (those before waited it out).
END_WHILE_RINGING_PATCH = "end-stops-the-ringing"


@workflow.defn(name=CALL_WORKFLOW)
class CallWorkflow:
    @workflow.init
    def __init__(self, input: CallInput) -> None:
        self._in = input
        self._line = Line(
            **input.model_dump(include={"call_id", "agent_id", "approval_id", "several_keys"})
        )
        self._status: CallStatus = "dialing"
        self._started_at: datetime = workflow.now()
        self._answered_at: datetime | None = None
        self._ended_at: datetime | None = None
        self._end_reason: str | None = None
        self._ring_outcome: LineEvent | None = None
        self._first: TurnResult | None = None
        self._heard: dict[int, LineEvent] = {}
        self._partial: dict[int, str] = {}
        self._played: set[int] = set()
        self._turns = asyncio.Lock()  # one turn at a time, in the order asked
        self._live: LiveCall | None = None  # the call system's call, once placed (Twilio)
        # The last turn's record, still being written while the agent already has its answer.
        self._recording: workflow.ActivityHandle[None] | None = None
        self._checked = False  # nothing is acted on before the input's tag checks out
        self._refused: str | None = None  # why the call was refused
        self._checking = asyncio.Lock()  # line events are checked in the order they came
        # What the call was about, settled while it waited for the human (its detail: how).
        self._withdrawn: LineEvent | None = None
        self._said: set[str] = set()  # the ids of the agent's turns taken, each said once

    # ---- the run: place the call, the first turn, then wait for the end ---------------------------

    @workflow.run
    async def run(self, input: CallInput) -> Ended:
        try:  # a call the deployment did not sign rings, says, writes and posts nothing
            input = self._in = await checked_call(input)
        except CallRefused as refused:
            workflow.set_current_details(reason := str(refused))
            self._refused = reason
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise ApplicationError(reason, type=errors.NOT_SIGNED, non_retryable=True) from None
        self._checked = True
        workflow.upsert_search_attributes([AGENT_ID.value_set(input.agent_id)])
        self._details()
        await self._record()
        first_audio = await self._synthesize(input.message, 1)
        # The line shows what will be said: a phone (or an answering machine) may play it.
        self._set_line(state="ringing", say=input.message, audio=first_audio)
        self._status = "ringing"
        ring_s = input.ring_timeout_s
        if input.system == "twilio" and self._ring_outcome is None:
            ring_s += CALL_SYSTEM_RING_SLACK_S  # Twilio reports no-answer itself
            await self._place_remote()
        await self._record()
        try:
            await workflow.wait_condition(
                lambda: self._ring_outcome is not None,
                timeout=timedelta(seconds=ring_s),
                timeout_summary="ring timeout",
            )
        except TimeoutError:
            self._ring_outcome = LineEvent(kind="no-answer")
            await self._end_remote()
        outcome = self._ring_outcome
        assert outcome is not None
        if outcome.kind != "answered":
            self._first = await self._missed(outcome)
            if outcome.kind == "withdrawn":
                await self._end_remote()  # stop the ringing
        else:
            async with self._turns:
                self._first = await self._exchange(input.message, first_audio, listen=True)
            if input.notify_mailbox:
                await outcomes.notify(self._in, self._first)
            remaining = input.max_duration_s - self._elapsed()
            try:
                await workflow.wait_condition(
                    lambda: self._ended_at is not None or self._withdrawn is not None,
                    timeout=timedelta(seconds=max(remaining, 0.001)),
                    timeout_summary="maximum call duration",
                )
            except TimeoutError:
                async with self._turns:
                    self._hang_up("completed", "the call reached its maximum duration")
                    await self._end_remote()
            if self._withdrawn is not None:
                await self._say_withdrawn(self._withdrawn)
        # Let turns that were waiting (and phones waiting for the line) see the end.
        await workflow.wait_condition(workflow.all_handlers_finished)
        # End this task before the one that completes the call: a line event arriving then fails
        # that task, and would take with it an `end` this task accepted (its caller gets an error).
        await workflow.sleep(timedelta(milliseconds=1))
        await self._record()
        return self._ended()

    async def _say_withdrawn(self, withdrawn: LineEvent) -> None:
        """Tell the human it was answered elsewhere (or timed out), then hang up."""
        words, reason = outcomes.withdrawn(self._in, withdrawn.detail)
        async with self._turns:
            if self._ended_at is None:
                audio = await self._synthesize(words, self._line.turn + 1)
                await self._exchange(words, audio, listen=False)
            if self._ended_at is None:
                self._hang_up("completed", reason)
                await self._end_remote()

    async def _missed(self, outcome: LineEvent) -> TurnResult:
        """Nobody took the call: leave the message another way, and say so."""
        status, reason = outcomes.missed(outcome, self._in)
        self._hang_up(status, reason)
        note = reason
        if self._in.fallback and outcome.kind != "withdrawn":
            where = await workflow.execute_local_activity(
                activities.send_call_fallback,
                FallbackRequest(call=self._in),
                start_to_close_timeout=policies.CALL_FALLBACK_TIMEOUT,
                retry_policy=policies.CALL_FALLBACK_RETRY,
                summary=f"{reason}: message sent another way",
            )
            note = f"{reason}; the message was sent {where} instead"
        result = TurnResult(
            call_id=self._in.call_id, status=status, success=False, timed_out=False, note=note
        )
        if self._in.notify_mailbox:
            await outcomes.notify(self._in, result)
        return result

    # ---- turns ------------------------------------------------------------------------------------

    @workflow.update
    async def initiate(self) -> TurnResult:
        """The first turn's outcome: what the human said, or why nobody did."""
        await self._first_turn()
        assert self._first is not None
        return self._first

    @workflow.update
    async def say(self, request: Say) -> TurnResult:
        """Speak to the human (the gateway's signed words); with `listen`, their answer."""
        await checked_turn(self._in.call_id, request, self._said)
        await self._first_turn()
        async with self._turns:
            if self._ended_at is not None:
                raise ApplicationError(self._ended_sentence(), type=errors.CALL_ENDED)
            audio = await self._synthesize(request.message, self._line.turn + 1)
            return await self._exchange(request.message, audio, listen=request.listen)

    @say.validator
    def _say_while_up(self, request: Say) -> None:
        if self._ended_at is not None:
            raise ValueError(self._ended_sentence())

    @workflow.update
    async def end(self, request: End) -> Ended:
        """Say goodbye (when there is a message), hang up once it has played, give the duration."""
        await checked_turn(self._in.call_id, request, self._said)
        if self._ring_outcome is None and workflow.patched(END_WHILE_RINGING_PATCH):
            # Nobody took it yet: the ringing stops now, not at the ring timeout.
            self._ring_outcome = LineEvent(kind="withdrawn", detail=WITHDRAWN_BY_THE_AGENT)
        await self._first_turn()
        async with self._turns:
            if self._ended_at is None:
                if request.message:
                    audio = await self._synthesize(request.message, self._line.turn + 1)
                    await self._exchange(request.message, audio, listen=False)
                if self._ended_at is None:
                    self._hang_up("completed", "the agent ended the call")
                    await self._end_remote()
        return self._ended()

    @workflow.signal
    async def line_event(self, event: LineEvent) -> None:
        """What happened on the line, once the gateway's tag on it checks out: anyone can
        signal, and a forged "heard" would be taken for the human's answer. A refused event
        changes nothing (its check's failure in the history says why)."""
        async with self._checking:
            await workflow.wait_condition(lambda: self._checked or self._refused is not None)
            if self._refused is not None or self._ended_at is not None:
                return
            checked = await checked_line_event(self._in.call_id, event)
            if checked is not None:
                self._on_line(checked)

    def _on_line(self, event: LineEvent) -> None:
        """A checked event. Events of another turn, or after the end, are ignored."""
        if self._ended_at is not None:
            return
        if event.kind == "withdrawn" and self._line.state == "dialing":
            self._ring_outcome = event  # withdrawn before it rang: it never will
            return
        if self._ring_outcome is None and self._line.state == "ringing":
            if event.kind == "answered":
                self._ring_outcome = event
                self._answered_at = workflow.now()
                self._status = "in-progress"
                self._set_line(state="connected", answered_by=event.phone_id)
            elif event.kind in outcomes.RING_ENDS:
                self._ring_outcome = event if event.kind != "hangup" else LineEvent(kind="declined")
            return
        if self._line.state != "connected":
            return
        if event.kind == "withdrawn":
            # Only a turn still waiting: one just answered is being decided; a goodbye ends anyway.
            waiting = self._line.expect == "answer" and self._line.turn not in self._heard
            if waiting and self._withdrawn is None:
                self._withdrawn = event
        elif event.kind == "hangup":
            self._hang_up("completed", "the human hung up")
        elif event.turn == self._line.turn:
            if event.kind == "heard":
                self._heard.setdefault(event.turn, event)
            elif event.kind == "partial" and event.text:
                self._partial[event.turn] = event.text
            elif event.kind == "played":
                self._played.add(event.turn)

    @workflow.query
    def line(self) -> Line:
        return self._line

    @workflow.update
    async def wait_line(self, request: WaitLine) -> Line:
        """The line once its version passes `after_version` (or as it is at the timeout)."""
        try:
            await workflow.wait_condition(
                lambda: (
                    self._line.version > request.after_version
                    or self._line.state == "ended"
                    or self._refused is not None
                ),
                timeout=timedelta(seconds=request.timeout_s),
            )
        except TimeoutError:
            pass
        return self._line

    async def _exchange(self, text: str, audio: AudioRef | None, *, listen: bool) -> TurnResult:
        """One turn: the phone is told what to play; then the answer (or the played word)."""
        turn = self._line.turn + 1
        self._set_line(turn=turn, say=text, audio=audio, expect="answer" if listen else "played")
        if self._live is not None and turn > 1:
            # The call holds the line between turns: it fetches this one now (turn 1: its TwiML).
            await call_system.play(self._live, turn)
        spoken = TurnRecord(
            turn=turn,
            speaker="agent",
            text=text,
            at=workflow.now(),
            audio=audio.name if audio else None,
        )
        played_s = audio.duration_s if audio else 0.0
        wait_s = played_s + (self._in.transcript_timeout_s if listen else PLAY_SLACK_S)

        def answered() -> bool:
            done = turn in self._heard if listen else turn in self._played
            return done or self._ended_at is not None or (listen and self._withdrawn is not None)

        try:
            await workflow.wait_condition(
                answered,
                timeout=timedelta(seconds=wait_s),
                timeout_summary=f"turn {turn}: transcript timeout" if listen else None,
            )
            timed_out = False
        except TimeoutError:
            timed_out = True
        result = TurnResult(call_id=self._in.call_id, turn=turn)
        if not listen:
            result.success = self._ended_at is None
            result.status = "played" if turn in self._played else result.status
            self._turn_done()
            await self._record([spoken], wait=False)
            return result
        heard = self._heard.get(turn)
        note = None
        if heard is not None:
            result.response = heard.text or ""
            if heard.audio is not None:
                result.response, note = await self._transcribe(heard.audio)
        else:
            result.response = self._partial.get(turn, "")
            if self._withdrawn is not None:
                result.status, result.success = "withdrawn", False
                note = f"{outcomes.withdrawn(self._in, self._withdrawn.detail)[1]} before the human answered"
            elif timed_out:
                result.status, result.timed_out = "timed-out", True
                note = f"no answer within {self._in.transcript_timeout_s:g} s; " + (
                    "this is what was heard so far" if result.response else "nothing was heard"
                )
            else:
                result.status, result.success = "hung-up", False
                note = f"{self._end_reason} before answering"
        result.note = note
        reply = TurnRecord(
            turn=turn,
            speaker="human",
            text=result.response,
            at=workflow.now(),
            audio=heard.audio.name if heard and heard.audio else None,
            note=note,
        )
        self._turn_done()
        await self._record([spoken, reply], wait=False)
        return result

    def _turn_done(self) -> None:
        # A phone that asks again (restarted, reconnected) must not be asked for this turn.
        if self._ended_at is None:
            self._set_line(expect=None)

    # ---- providers ----------------------------------------------------------------------------------

    async def _synthesize(self, text: str, turn: int) -> AudioRef | None:
        """The words as audio, from the first provider of the chain that manages; None when none
        does (a phone still shows the words)."""
        for provider in self._in.tts:
            try:
                audio = await workflow.execute_local_activity(
                    activities.synthesize_speech,
                    SpeechRequest(
                        provider=provider,
                        text=text,
                        name=f"{self._in.call_id}/{turn:03d}-agent",
                    ),
                    start_to_close_timeout=policies.SPEECH_TIMEOUT,
                    retry_policy=policies.SPEECH_RETRY,
                    summary=f'say ({provider}): "{outcomes.short(text)}"',
                )
                return audio
            except (ActivityError, ApplicationError) as exc:
                # A local activity's failure may arrive bare or wrapped in an ActivityError.
                workflow.logger.warning("TTS %s failed: %s", provider, exc.cause or exc)
        return None

    async def _transcribe(self, audio: AudioRef) -> tuple[str, str | None]:
        for provider in self._in.stt:
            try:
                transcript = await workflow.execute_local_activity(
                    activities.transcribe_speech,
                    TranscribeRequest(provider=provider, audio=audio),
                    start_to_close_timeout=policies.SPEECH_TIMEOUT,
                    retry_policy=policies.SPEECH_RETRY,
                    summary=f"transcribe {audio.name} ({provider})",
                )
                return transcript.text, None
            except (ActivityError, ApplicationError) as exc:
                workflow.logger.warning("STT %s failed: %s", provider, exc.cause or exc)
        return "", "the answer could not be transcribed"

    # ---- the line, the record, the mailbox ----------------------------------------------------------

    def _set_line(self, **changes: object) -> None:
        self._line = self._line.model_copy(update={**changes, "version": self._line.version + 1})

    def _hang_up(self, status: CallStatus, reason: str) -> None:
        if self._ended_at is not None:
            return
        self._ended_at = workflow.now()
        self._status = status
        self._end_reason = reason
        self._set_line(state="ended", expect=None, ended_reason=reason)
        self._details()

    def _elapsed(self) -> float:
        return (workflow.now() - self._started_at).total_seconds()

    def _duration(self) -> float:
        if self._answered_at is None:
            return 0.0
        end = self._ended_at or workflow.now()
        return round((end - self._answered_at).total_seconds(), 3)

    def _ended(self) -> Ended:
        return Ended(
            call_id=self._in.call_id,
            duration_seconds=self._duration(),
            status=self._status,
            reason=self._end_reason,
        )

    def _ended_sentence(self) -> str:
        return f"call {self._in.call_id} has ended ({self._end_reason})"

    def _details(self) -> None:
        details = f"{self._status}: call to the {self._in.system} phone of {self._in.agent_id}"
        if self._end_reason:
            details += f"\n{self._end_reason}"
        workflow.set_current_details(details)

    async def _record(self, turns: list[TurnRecord] | None = None, *, wait: bool = True) -> None:
        """Write the call's row (and append these turns to its transcript), after the write
        before it. Without `wait` the write goes on while the turn returns its answer."""
        if self._recording is not None:
            await self._recording
            self._recording = None
        self._details()
        record = CallRecord(
            id=self._in.call_id,
            agent_id=self._in.agent_id,
            status=self._status,
            phone_number=self._in.to_number or self._in.system,
            started_at=self._started_at,
            ended_at=self._ended_at,
            duration_seconds=self._duration() if self._ended_at else None,
            error=self._end_reason if self._status in ("failed",) else None,
        )
        what = [f'{t.speaker}: "{outcomes.short(t.text)}"' for t in turns or []]
        writing = workflow.start_local_activity(
            activities.record_call,
            CallUpdate(call=record, turns=turns or []),
            start_to_close_timeout=policies.PROJECTION_TIMEOUT,
            retry_policy=policies.PROJECTION_RETRY,
            summary="; ".join(what) or f"call {self._status}",
        )
        if wait:
            await writing
        else:
            self._recording = writing

    async def _place_remote(self) -> None:
        placed = await call_system.place(self._in)
        if isinstance(placed, LineEvent):
            self._ring_outcome = placed  # it could not be placed
        else:
            self._live = placed

    async def _end_remote(self) -> None:
        if self._live is not None:
            await call_system.hang_up(self._live, answered=self._answered_at is not None)

    async def _first_turn(self) -> None:
        await workflow.wait_condition(lambda: self._first is not None or self._refused is not None)
        if self._refused is not None:
            raise ApplicationError(self._refused, type=errors.NOT_SIGNED, non_retryable=True)
