"""The socket methods of phone calls: what the MCP voice tools and `agentcomms call` ask
(`call`, `call_say`, `call_end`, `calls`) and what the local phone asks (`phone_wait`,
`phone_event`).

A call is its workflow (``call-<call_id>``): a turn is an update, the phone's news a signal
(durable before the phone hears "accepted"), and what the phone should play is the workflow's
line, which `phone_wait` long-polls.

Temporal authenticates no one, so the call's input and every line event (the local phone's and
the call system's webhooks') leave here tagged with the deployment key: the call acts on
nothing else (:mod:`agentcomms.trust`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, Field, StringConstraints
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode
from ulid import ULID

from agentcomms.config import Config
from agentcomms.errors import RpcError
from agentcomms.models import ACTIVE_STATUSES, CallRecord, utcnow
from agentcomms.phone_line import claim_phone, held_since
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from agentcomms.voice.audio import AudioStore, turn_audio_name
from agentcomms.voice.callsystem import LOCAL_NUMBER, call_system
from agentcomms.voice.models import (
    MAX_PHONE_RECORDING_BYTES,
    Line,
    LineEvent,
)
from agentcomms.voice.stt import stt_chain
from agentcomms.voice.tts import tts_chain
from agentcomms.workflow_ids import call_workflow_id
from gateway.agents.budget import Budgets
from gateway.phone.lines import QUERY_TIMEOUT, LineReader
from gateway.socket.declare import ForItself, Human, declare
from gateway.socket.params import AgentId, MessageText, Params
from gateway.socket.protocol import INVALID_PARAMS, NOT_FOUND
from gateway.socket.results import Calls, Hung, Turn
from workflows.call import CallInput, CallWorkflow, End, Say, TurnResult

log = logging.getLogger(__name__)

CALL_ID_PATTERN = r"^c_[0-9A-Z]{26}$"
# A phone's long poll: the longest wait asked of one workflow update, and how often the
# projection is looked at for a new call ringing while the phone has none.
LINE_WAIT_S = 20.0
RING_POLL_S = 0.1

T = TypeVar("T")

CallId = Annotated[str, StringConstraints(pattern=CALL_ID_PATTERN)]


def _request_id(value: str) -> str:
    if not value.strip() or len(value) > 200:
        raise ValueError("a request id is 1-200 characters")
    return value


class CallParams(Params):
    agent_id: AgentId
    message: MessageText
    wait: bool = True
    request_id: Annotated[str | None, AfterValidator(lambda v: v and _request_id(v))] = Field(
        default=None, description="retry-safe: the same request id places one call"
    )


class CallSayParams(Params):
    call_id: CallId
    message: MessageText
    listen: bool = True
    agent_id: AgentId | None = None  # when given, the call must be this agent's


class CallEndParams(Params):
    call_id: CallId
    message: Annotated[str, StringConstraints(max_length=10_000)] | None = None
    agent_id: AgentId | None = None


class CallsParams(Params):
    agent_id: AgentId | None = None
    active: bool = False
    limit: Annotated[int, Field(ge=1, le=1000)] = 50


class PhoneWaitParams(Params):
    known: dict[str, int] = Field(
        default_factory=dict, description="call id -> the line version this phone has seen"
    )
    timeout: Annotated[float, Field(ge=0, le=60)] = 20


class PhoneEventParams(Params):
    call_id: CallId
    kind: Literal["answered", "declined", "played", "heard", "partial", "hangup"]
    turn: int | None = None
    text: Annotated[str, StringConstraints(max_length=100_000)] | None = None
    audio_b64: str | None = Field(default=None, description="heard: a WAV recording, base64")
    phone_id: Annotated[str, StringConstraints(max_length=100)] | None = None


def _turn_json(result: TurnResult) -> Turn:
    return {
        "call_id": result.call_id,
        "status": result.status,
        "turn": result.turn,
        "response": result.response,
        "timed_out": result.timed_out,
        "success": result.success,
        "note": result.note,
    }


def new_call_id(agent_id: str, request_id: str | None) -> str:
    """A fresh call id, or for a request id always the same one (a retried request finds its
    call instead of placing another)."""
    if request_id is None:
        return f"c_{ULID()}"
    digest = hashlib.sha256(f"agentcomms/call/v1\0{agent_id}\0{request_id}".encode()).digest()
    return f"c_{ULID.from_bytes(digest[:16])}"


class CallControl:
    def __init__(
        self,
        cfg: Config,
        client: Client,
        store: Store,
        key: DeploymentKey,
        lines: LineReader,
        *,
        line_observers: Sequence[Callable[[str, LineEvent], Awaitable[None]]] = (),
    ) -> None:
        self._cfg = cfg
        self._client = client
        self._store = store
        self._key = key
        self._lines = lines
        self._audio = AudioStore(cfg.voice.audio_root())
        self._budgets = Budgets(cfg, store)
        # Who hears each line event once the call holds it (a request's call is answered).
        self._line_observers = tuple(line_observers)

    # ---- for agents ----------------------------------------------------------------------------

    @declare(ForItself("agent_id"))
    async def call(self, p: CallParams) -> Turn:
        """Place a call. Blocking: the first answer. Non-blocking: the call id at once; the
        answer arrives in the agent's mailbox."""
        system, number = call_system(self._cfg)
        call_id = new_call_id(p.agent_id, p.request_id)
        placed_at = utcnow()
        claimed = await self._store.get_call(call_id) is None  # a retry rings no second time
        if claimed:
            busy = await self._claim_phone(p.agent_id, call_id, number or system, placed_at)
            if busy is not None:
                return busy
        try:
            if claimed:
                await self._budgets.spend(p.agent_id, "calls")
            return await self._place(p, call_id, placed_at)
        except Exception:
            if claimed:  # a call that never started must not keep the phone from the others
                await self._give_back_unless_placed(call_id)
            raise

    async def _place(self, p: CallParams, call_id: str, placed_at: datetime) -> Turn:
        system, number = call_system(self._cfg)
        voice = self._cfg.voice
        start: dict[str, Any] = {
            "id": call_workflow_id(call_id),
            "task_queue": self._cfg.temporal.task_queue,
            "id_conflict_policy": WorkflowIDConflictPolicy.USE_EXISTING,
            # A retried request after the call ended must not ring again.
            "id_reuse_policy": WorkflowIDReusePolicy.REJECT_DUPLICATE,
            "static_summary": f"call from {p.agent_id} to the {number or system} phone",
        }
        call_input = self._key.sign_call(
            CallInput(
                call_id=call_id,
                agent_id=p.agent_id,
                message=p.message,
                system=system,
                to_number=number,
                tts=tts_chain(self._cfg),
                stt=stt_chain(self._cfg),
                ring_timeout_s=voice.ring_timeout_s,
                transcript_timeout_s=voice.transcript_timeout_s,
                max_duration_s=voice.max_call_duration_s,
                fallback=voice.sms_fallback,
                fallback_message=voice.sms_fallback_message,
                notify_mailbox=not p.wait,
                placed_at=placed_at,
            )
        )
        if not p.wait:
            try:
                await self._client.start_workflow(CallWorkflow.run, call_input, **start)
            except WorkflowAlreadyStartedError:
                pass  # a retried request: that call is the one
            return {"call_id": call_id, "status": "ringing", "wait": False}
        operation = WithStartWorkflowOperation(CallWorkflow.run, call_input, **start)
        try:
            result = await self._client.execute_update_with_start_workflow(
                CallWorkflow.initiate, start_workflow_operation=operation, id="initiate"
            )
        except WorkflowAlreadyStartedError:
            raise RpcError(
                NOT_FOUND, f"call {call_id} (this request id's) has ended already"
            ) from None
        return _turn_json(result)

    async def _give_back_unless_placed(self, call_id: str) -> None:
        try:
            await self._lines.handle(call_id).describe(rpc_timeout=QUERY_TIMEOUT)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                await self._store.release_line(call_id)

    async def _claim_phone(
        self, agent_id: str, call_id: str, phone: str, now: datetime
    ) -> Turn | None:
        """Take the human's phone for the agent's call; while it is on another call (a request's
        call above all, which the human may be answering), nothing rings, nothing is spent, and
        the agent is told the line is busy."""
        claim = CallRecord(
            id=call_id, agent_id=agent_id, status="dialing", phone_number=phone, started_at=now
        )
        since = held_since(self._cfg.voice, now)
        if await claim_phone(self._store, self._client, claim, since=since) is None:
            return None
        return {
            "call_id": call_id,
            "status": "busy",
            "response": "",
            "timed_out": False,
            "success": False,
            "note": "the human's phone is on another call, so this one was not placed (and "
            "not counted): call again once that call has ended, or send a message instead",
        }

    @declare(ForItself("agent_id"))
    async def call_say(self, p: CallSayParams) -> Turn:
        """Say something on a call in progress and hear the human's answer."""
        await self._check_owner(p.call_id, p.agent_id)
        handle = self._lines.handle(p.call_id)
        result = await self._turn(
            p.call_id,
            handle.execute_update(
                CallWorkflow.say,
                self._key.sign_turn(p.call_id, Say(message=p.message, listen=p.listen)),
            ),
        )
        return _turn_json(result)

    @declare(ForItself("agent_id"))
    async def call_end(self, p: CallEndParams) -> Hung:
        """Hang up a call in progress."""
        await self._check_owner(p.call_id, p.agent_id)
        handle = self._lines.handle(p.call_id)
        try:
            ended = await self._turn(
                p.call_id,
                handle.execute_update(
                    CallWorkflow.end, self._key.sign_turn(p.call_id, End(message=p.message or None))
                ),
            )
        except RpcError:
            # Ended already (and its workflow closed): the duration it had is in its result.
            row = await self._store.get_call(p.call_id)
            if row is None or row.duration_seconds is None:
                raise
            return {
                "call_id": p.call_id,
                "duration_seconds": row.duration_seconds,
                "status": row.status,
                "reason": "the call had ended already",
            }
        return {
            "call_id": ended.call_id,
            "duration_seconds": ended.duration_seconds,
            "status": ended.status,
            "reason": ended.reason,
        }

    @declare(ForItself("agent_id"))
    async def calls(self, p: CallsParams) -> Calls:
        """The calls an agent placed, in progress and recent, with how each ended."""
        rows = await self._store.list_calls(agent_id=p.agent_id, active=p.active, limit=p.limit)
        return {"calls": [r.model_dump(mode="json") for r in rows]}

    async def _turn(self, call_id: str, update: Awaitable[T]) -> T:
        try:
            return await update
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            message = cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
            raise RpcError(NOT_FOUND, message) from None
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise RpcError(NOT_FOUND, await self._gone(call_id)) from None
            raise

    async def _gone(self, call_id: str) -> str:
        row = await self._store.get_call(call_id)
        if row is None:
            return f"no call {call_id}; `agentcomms calls` lists them"
        return f"call {call_id} has ended ({row.status})"

    async def _check_owner(self, call_id: str, agent_id: str | None) -> None:
        if agent_id is None:
            return
        row = await self._store.get_call(call_id)
        # Just placed, the call may have no row yet: its workflow knows whose it is.
        line = None if row else await self._lines.now(call_id)
        owner = row.agent_id if row else line.agent_id if line else agent_id
        if owner != agent_id:
            raise RpcError(NOT_FOUND, f"no call {call_id} of {agent_id}'s")

    # ---- for the local phone ----------------------------------------------------------------------

    @declare(Human(decides=True))
    async def phone_wait(self, p: PhoneWaitParams) -> dict[str, Any]:
        """The local phone's calls once one of them changed (or rings, or ended), or as they are
        at the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + p.timeout
        while True:
            lines = await self._local_lines(p.known)
            remaining = deadline - loop.time()
            # News: a line that moved, or a new call (one that ended before the phone saw it
            # ring is not news: nothing can be done about it).
            changed = any(
                p.known.get(line.call_id) != line.version
                and (line.call_id in p.known or line.state != "ended")
                for line in lines
            )
            if changed or remaining <= 0:
                return {"calls": [self._shown(line) for line in lines]}
            live = [line for line in lines if line.state != "ended"]
            if live:
                # A call in progress: the workflow answers when its line moves, with the line.
                moved = await self._lines.moved(live[0], min(remaining, LINE_WAIT_S))
                if moved is not None and moved.version != live[0].version:
                    return {"calls": [self._shown(moved)]}
            else:
                await asyncio.sleep(min(remaining, RING_POLL_S))

    @declare(Human(decides=True))
    async def phone_event(self, p: PhoneEventParams) -> dict[str, Any]:
        """Something happened on the local phone; accepted once the call's workflow holds it."""
        audio = None
        if p.audio_b64 is not None:
            if p.kind != "heard" or p.turn is None:
                raise RpcError(INVALID_PARAMS, "audio_b64: only a heard event of a turn has audio")
            try:
                data = base64.b64decode(p.audio_b64, validate=True)
            except (binascii.Error, ValueError):
                raise RpcError(INVALID_PARAMS, "audio_b64: not base64") from None
            if len(data) > MAX_PHONE_RECORDING_BYTES:
                raise RpcError(
                    INVALID_PARAMS, f"audio_b64: over {MAX_PHONE_RECORDING_BYTES:,} bytes"
                )
            audio = self._audio.write(
                turn_audio_name(p.call_id, p.turn, "human"), data, provider="phone"
            )
        event = LineEvent(kind=p.kind, turn=p.turn, text=p.text, audio=audio, phone_id=p.phone_id)
        if not await self.line_event(p.call_id, event):
            return {"accepted": False, "reason": await self._gone(p.call_id)}
        return {"accepted": True}

    # ---- for the call systems' webhooks (and the local phone) -------------------------------------

    async def line_event(self, call_id: str, event: LineEvent) -> bool:
        """Hand what happened on the line to the call: durable once this returns True; False
        when the call is over."""
        handle = self._lines.handle(call_id)
        try:
            await handle.signal(CallWorkflow.line_event, self._key.sign_line_event(call_id, event))
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        for observer in self._line_observers:
            await observer(call_id, event)
        return True

    async def current_line(self, call_id: str, *, ready_within_s: float = 0) -> Line | None:
        """The call's line (the call system's webhooks read it); with `ready_within_s`, waits
        that long for a turn to be asked."""
        return await self._lines.current(call_id, ready_within_s=ready_within_s)

    async def _local_lines(self, known: dict[str, int]) -> list[Line]:
        """The lines of the calls ringing or up on the local phone, and of the calls the phone
        knew that have ended since."""
        rows = await self._store.list_calls(active=True, phone_number=LOCAL_NUMBER)
        active = {r.id for r in rows}
        lines = [line for line in await asyncio.gather(*map(self._lines.now, active)) if line]
        for call_id in known.keys() - active:
            # A call the phone knew that the projection shows over: its end, from the row
            # (no query: a closed workflow's would replay its whole history).
            row = await self._store.get_call(call_id)
            if row is not None and row.status not in ACTIVE_STATUSES:
                lines.append(
                    Line(
                        call_id=call_id,
                        agent_id=row.agent_id,
                        version=known[call_id] + 1,
                        state="ended",
                        ended_reason=row.status,
                    )
                )
        return sorted(lines, key=lambda line: line.call_id)

    def _shown(self, line: Line) -> dict[str, Any]:
        data = line.model_dump(mode="json")
        # The phone runs on this machine (it reached the Unix socket): it plays the file itself.
        data["audio_path"] = str(self._audio.path(line.audio.name)) if line.audio else None
        return data
