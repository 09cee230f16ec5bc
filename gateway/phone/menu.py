"""What a human who calls in hears and can do, whatever the phone: the pending requests one by
one (a permission's 1 allow, 2 deny, 3 skip; a plan's 1 approve, 2 keep planning; a question's
options a digit each, 9 skip; by key or word, answered through the one path every surface's
answer takes, `via` call), the agents' last replies, and a message for an agent, posted to its
mailbox like a chat message (``[phone call from +1555…] …``).

Each call in is a call in the projection (``direction: in``, the phone's call id), with its
transcript beside the other calls' (what the menu said, with the sound it was spoken in, and what
the caller answered, a PIN never written) and a recorded message's sound, so the console lists it
with the calls out.

Each step is a :class:`Prompt` (the words, and what answer it waits for); the phone (Twilio's
webhooks in :mod:`gateway.phone.calls_in`, the local phone's `agentcomms phone --dial` through the
socket) says it and hands back the answer. A PIN is checked across calls
(:mod:`gateway.phone.pins`: a number that keys too many wrong ones is locked out for a while).
A call's progress (who called, whether the PIN was right, the requests still to offer) is kept
in the projection by the phone's call id (:mod:`agentcomms.store.phone_callers`), not in this
gateway's memory: each step is a request of its own, so a gateway restarted mid-call carries
the call on at its next step.

A message may be the caller's last words: hung up on instead of ended with #, Twilio still posts
its recording, and may do so after it said the call was over. A call that ends while its prompt
awaits a message whose recording the phone says may follow keeps its progress until the
recording came; whenever the recording comes after the caller hung up, the message goes to its
agent and the call tells nobody anything more.
A recording the phone cannot fetch yet is a message taken all the same: the caller hears it will
reach the agent shortly, and the phone brings its words later (:meth:`PhoneMenu.message_later`).
"""

from __future__ import annotations

import asyncio
import re
import uuid
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from agentcomms.approval_models import ApprovalRequest
from agentcomms.config import Config
from agentcomms.config.voice import LOCAL_PHONE
from agentcomms.ids import new_event_id
from agentcomms.models import ACTIVE_STATUSES, CallRecord, CallStatus, Event, utcnow
from agentcomms.store import Store
from agentcomms.store.phone_callers import PhoneCaller
from agentcomms.voice.audio import AudioStore, turn_audio_name
from agentcomms.voice.models import TurnRecord
from gateway.agents.notices import HumanNotices
from gateway.approvals.methods import ApprovalMethods
from gateway.approvals.phone import answer_by_phone
from gateway.approvals.words import asks, heard_on_phone, hidden_on, keys, shown_remotely
from gateway.phone.pins import PhonePins
from gateway.socket.declare import Human, declare
from gateway.socket.params import Params

Post = Callable[[Event], Awaitable[str]]
# How a phone speaks a prompt: the words, and the name to keep their sound under in the audio
# directory; the name it kept (None: the phone says the words itself).
Speak = Callable[[str, str], Awaitable[str | None]]
Expect = Literal["pin", "key", "message", "end"]
# A message's recording at the answer to its prompt: heard (its words are the answer), not
# fetched yet (the phone brings it later: :meth:`PhoneMenu.message_later`), or sent already (the
# phone brought it first).
Left = Literal["heard", "awaited", "sent"]


@dataclass
class Prompt:
    """What to say, and what the phone waits for next: a PIN, a key (or word), a message, or
    nothing (hang up). The answer goes back to `step` with `query`."""

    words: str
    expect: Expect
    step: str = ""
    query: dict[str, str] = field(default_factory=dict)
    audio: str | None = None  # the words' sound in the audio directory, where the phone spoke it


def _end(words: str = "Goodbye.") -> Prompt:
    return Prompt(words, "end")


class OneAtATime:
    """A call's requests one at a time (a lock per call, kept while one is in flight): the
    phone's word that the call is over must not end it under a step still being answered, nor
    that step bring it back."""

    def __init__(self) -> None:
        self._calls: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def __call__(self, call: str) -> asyncio.Lock:
        lock = self._calls.get(call)
        if lock is None:
            lock = self._calls[call] = asyncio.Lock()
        return lock


class PhoneMenu:
    def __init__(self, cfg: Config, store: Store, approvals: ApprovalMethods, *, post: Post):
        self._cfg = cfg
        self._store = store
        self._approvals = approvals
        self._post = post
        self._pins = PhonePins(cfg, store, HumanNotices(cfg, store))
        self.audio = AudioStore(cfg.voice.audio_root())

    @property
    def store(self) -> Store:
        return self._store

    async def start(
        self, call: str, number: str, *, admitted: bool = False, speak: Speak | None = None
    ) -> Prompt:
        """A call from `number` comes in: the PIN first, unless the phone admitted it already
        (the local phone is the machine's own)."""
        caller = PhoneCaller(number=number, started_at=utcnow())
        if admitted:
            prompt = await self._admit(caller)
        elif (locked := await self._pins.locked_out(number)) is not None:
            await self.record_refusal(number, call, locked.why)
            prompt = _end(locked.words)
        else:
            prompt = Prompt("Enter your PIN, then press the pound key.", "pin", "pin")
        return await self._told(call, caller, prompt, speak)

    async def answer(
        self,
        call: str,
        step: str,
        heard: str,
        *,
        query: dict[str, str] | None = None,
        audio: str | None = None,
        speak: Speak | None = None,
        hung_up: bool = False,
        left: Left = "heard",
    ) -> Prompt:
        """The answer to the prompt of `step` (`audio`: the recording it was heard in, in the
        audio directory; `hung_up`: the phone says the caller hung up as they gave it; `left`:
        where a message's recording is): the next prompt."""
        caller = await self._store.caller(call)
        if caller is None:
            return _end("This call is not known here any more. Goodbye.")
        if left == "heard":  # else its words are written once its recording came
            said = "(a PIN)" if step == "pin" else heard
            self._transcribed(call, caller.turn, "human", said, audio)
        query = query or {}
        if hung_up or await self._ended(call):
            return await self._last_words(call, caller, step, query, heard, left)
        if step == "pin":
            prompt = await self._pin(call, caller, heard)
        elif not caller.admitted:
            prompt = _end()
        elif step == "menu":
            prompt = await self._menu(caller, heard)
        elif step == "approval":
            prompt = await self._approval(caller, query.get("id", ""), heard)
        elif step == "agent":
            prompt = self._agent(heard)
        elif step == "message":
            prompt = await self._message(caller, query.get("agent", ""), heard, left)
        else:
            prompt = _end()
        return await self._told(call, caller, prompt, speak)

    async def hung_up(
        self,
        call: str,
        status: CallStatus,
        duration_s: float | None,
        *,
        recording_may_follow: bool = False,
    ) -> bool:
        """The phone says the call is over (the caller hung up mid-menu, or the line dropped):
        its row ends as the phone says and its progress is forgotten, unless a message was being
        recorded and the phone may still send it (`recording_may_follow`: its recording began):
        then the progress waits for it. A call ended already (the menu said goodbye, or the
        phone said so before) or not one of ours is left alone: the phone may say it twice.
        False then."""
        row = await self._store.get_call(call)
        if row is None or row.direction != "in" or row.status not in ACTIVE_STATUSES:
            return False
        now = utcnow()
        if duration_s is None:
            duration_s = (now - row.started_at).total_seconds()
        ended = {"status": status, "ended_at": now, "duration_seconds": duration_s}
        await self._store.upsert_call(row.model_copy(update=ended))
        caller = await self._store.caller(call)
        if not (recording_may_follow and caller is not None and caller.awaits == "message"):
            await self._store.forget_caller(call)
        return True

    async def message_later(
        self, call: str, number: str, agent: str, turn: int, text: str, audio: str | None
    ) -> None:
        """A message whose recording the phone brought after the caller was told it was taken
        (the call may be over by then): its words go into the call's transcript where the caller
        said them (prompt `turn`) and to its agent, as any message does."""
        self._transcribed(call, turn, "human", text.strip() or "(no words heard)", audio)
        if agent in self._agents() and text.strip():
            await self._post(_message_event(number, agent, text))

    def message_lost(self, call: str, agent: str, turn: int, why: str) -> None:
        """A message the caller was told was taken, whose recording never became available:
        the call's transcript says so where the caller left it."""
        said = f"(a message for {agent}, whose recording could not be fetched: {why})"
        self._transcribed(call, turn, "human", said, None)

    # ---- the call's record -------------------------------------------------------------------

    async def _told(
        self, call: str, caller: PhoneCaller, prompt: Prompt, speak: Speak | None
    ) -> Prompt:
        """The prompt, spoken by the phone, once it is in the call's transcript, the call's row
        says how far the call is, and its progress is kept for its next step (forgotten once
        the prompt hangs up)."""
        caller.turn += 1
        if speak is not None:
            prompt.audio = await speak(prompt.words, turn_audio_name(call, caller.turn, "menu"))
        self._transcribed(call, caller.turn, "menu", prompt.words, prompt.audio)
        over = prompt.expect == "end"
        now = utcnow()
        await self._store.upsert_call(
            CallRecord(
                id=call,
                agent_id="",
                status="completed" if over else "in-progress",
                direction="in",
                phone_number=caller.number,
                started_at=caller.started_at,
                ended_at=now if over else None,
                duration_seconds=(now - caller.started_at).total_seconds() if over else None,
                transcript_ref=self.audio.transcript_ref(call),
            )
        )
        if over:
            await self._store.forget_caller(call)
        else:
            caller.awaits = prompt.expect
            await self._store.keep_caller(call, caller, now)
        return prompt

    async def _ended(self, call: str) -> bool:
        row = await self._store.get_call(call)
        return row is not None and row.status not in ACTIVE_STATUSES

    async def _last_words(
        self,
        call: str,
        caller: PhoneCaller,
        step: str,
        query: dict[str, str],
        heard: str,
        left: Left,
    ) -> Prompt:
        """An answer given as the caller hung up, or come after the call's end: a message still
        goes to its agent, once (the call's progress goes with it); nobody is left to hear more,
        so nothing more is told and the call's row stays as it is (ended by the phone's word)."""
        if step == "message" and caller.admitted:
            await self._message(caller, query.get("agent", ""), heard, left)
        await self._store.forget_caller(call)
        return _end()

    def _transcribed(
        self, call: str, turn: int, speaker: str, text: str, audio: str | None
    ) -> None:
        line = {"turn": turn, "speaker": speaker, "text": text, "at": utcnow(), "audio": audio}
        self.audio.append_turns(call, [TurnRecord.model_validate(line)])

    # ---- steps ----------------------------------------------------------------------------------

    async def _pin(self, call: str, caller: PhoneCaller, heard: str) -> Prompt:
        refused = await self._pins.check(caller.number, heard)
        if refused is not None:
            await self.record_refusal(caller.number, call, refused.why)
            return _end(refused.words)
        return await self._admit(caller)

    async def _admit(self, caller: PhoneCaller) -> Prompt:
        caller.admitted = True
        caller.pending = list(await self._heard(caller))
        return self._menu_prompt(caller, "")

    async def _heard(self, caller: PhoneCaller) -> dict[str, ApprovalRequest]:
        """The open requests this caller's phone hears, by id: those of agents that name it
        among their approvers, or name none (the PIN says who calls, not whose requests they
        may decide)."""
        views = await self._approvals.open_views()
        hears = self._cfg.phone_hears
        return {v.request.id: v.request for v in views if hears(v.request.agent_id, caller.number)}

    def _menu_prompt(self, caller: PhoneCaller, before: str) -> Prompt:
        count = len(caller.pending)
        waiting = f"{count} request{'s' if count != 1 else ''} waiting for you. "
        words = (
            before + waiting + "Press 1 to hear them, 2 for the agents' last replies, "
            "3 to leave a message for an agent."
        )
        return Prompt(words, "key", "menu")

    async def _menu(self, caller: PhoneCaller, heard: str) -> Prompt:
        choice = _first_digit(heard)
        if choice == "1":
            return await self._offer(caller, "")
        if choice == "2":
            return self._menu_prompt(caller, await self._replies())
        if choice == "3":
            names = ", ".join(f"{n} for {a}" for n, a in enumerate(self._agents(), start=1))
            return Prompt(f"Which agent? Press {names}.", "key", "agent")
        return self._menu_prompt(caller, "")

    async def _offer(self, caller: PhoneCaller, before: str) -> Prompt:
        """The next pending request, or the menu when none is left."""
        pending = await self._heard(caller)
        caller.pending = [i for i in caller.pending if i in pending]
        if not caller.pending:
            return self._menu_prompt(caller, before + "No more requests. ")
        request = pending[caller.pending[0]]
        # Spoken through the call system and its speech providers: secrets hidden, and no keys
        # to answer what the call does not say whole.
        asked = asks(shown_remotely(request), spoken=True)
        asked += "" if asked.endswith((".", "?", "!")) else "."
        hidden = hidden_on(request, "call")
        words = f"{before}{asked} {keys(request, last='skip', hidden=hidden)}"
        return Prompt(words, "key", "approval", {"id": request.id})

    async def _approval(self, caller: PhoneCaller, approval_id: str, heard: str) -> Prompt:
        if approval_id in caller.pending:
            caller.pending.remove(approval_id)
        view = await self._approvals.view(approval_id)
        choice = heard_on_phone(view.request, heard) if view is not None else None
        if choice is None:
            return await self._offer(caller, "Skipped. ")
        told = await answer_by_phone(self._cfg, self._approvals, approval_id, choice, caller.number)
        return await self._offer(caller, f"{told} ")

    def _agents(self) -> list[str]:
        return sorted(set(self._cfg.agents) | set(self._cfg.chat.channels.values()))

    def _agent(self, heard: str) -> Prompt:
        agents = self._agents()
        choice = _first_digit(heard)
        if not choice.isdigit() or not 1 <= int(choice) <= len(agents):
            return _end("No such agent. Goodbye.")
        agent = agents[int(choice) - 1]
        return Prompt(
            f"Leave your message for {agent} after the tone, then press pound.",
            "message",
            "message",
            {"agent": agent},
        )

    async def _message(self, caller: PhoneCaller, agent: str, text: str, left: Left) -> Prompt:
        if agent not in self._agents():
            return _end()
        if left == "awaited":
            before = f"Your message was recorded; it will reach {agent} shortly. "
            return self._menu_prompt(caller, before)
        if left == "heard":
            if not text.strip():
                return self._menu_prompt(caller, "Your message could not be heard. ")
            await self._post(_message_event(caller.number, agent, text))
        return self._menu_prompt(caller, f"Your message for {agent} was sent. ")

    async def _replies(self) -> str:
        said = []
        for agent in self._agents():
            for event in await self._store.latest_events(agent, 50):
                if event.direction == "out" and event.type == "agent_message":
                    said.append(f"{agent} said: {event.text}.")
                    break
        return " ".join(said) + " " if said else "No agent has replied yet. "

    async def record_refusal(self, number: str, call: str, why: str) -> None:
        """A caller who may not in: recorded for the operator's audit, never for an agent."""
        await self._store.record_event(
            Event(
                id=new_event_id(),
                agent_id="default",
                channel_id=f"phone:{number or 'unknown'}",
                type="human_message",
                role="human",
                status="rejected",
                error=f"inbound call from {number or 'an unknown number'} refused: {why}",
                payload={"text": "", "provider": "phone", "sender_id": number, "call_sid": call},
                created_at=utcnow(),
            )
        )


def _message_event(number: str, agent: str, text: str) -> Event:
    """A caller's message, for the agent's mailbox like a chat message."""
    return Event(
        id=new_event_id(),
        agent_id=agent,
        channel_id=f"phone:{number}",
        type="human_message",
        role="human",
        payload={
            "text": f"[phone call from {number}] {text.strip()}",
            "provider": "phone",
            "sender_id": number,
            "sender_name": number,
        },
    )


def _first_digit(heard: str) -> str:
    words = {"one": "1", "two": "2", "three": "3", "four": "4", "five": "5"}
    found = re.findall(r"[a-z]+|\d", heard.lower())
    return words.get(found[0], found[0]) if found else ""


class DialParams(Params):
    pass


class DialAnswerParams(Params):
    call: Annotated[str, StringConstraints(pattern=r"^local-[0-9a-f]{32}$")]
    step: Annotated[str, StringConstraints(max_length=20)]
    query: dict[str, Annotated[str, StringConstraints(max_length=40)]] = Field(
        default_factory=dict, max_length=4
    )
    text: Annotated[str, StringConstraints(max_length=10_000)] = ""


class DialHangUpParams(Params):
    call: Annotated[str, StringConstraints(pattern=r"^local-[0-9a-f]{32}$")]


class LocalDial:
    """`agentcomms phone --dial`: the same call on the local phone, through the socket. The
    socket is the machine owner's (0600), so the local phone needs no PIN; like approving, it is
    closed to agents' requests (:mod:`gateway.socket.confine`)."""

    def __init__(self, menu: PhoneMenu) -> None:
        self._menu = menu
        self._one_at_a_time = OneAtATime()  # a Ctrl-C's hang-up may overtake its last answer

    @declare(Human(decides=True))
    async def phone_dial(self, _: DialParams) -> dict[str, Any]:
        """Call in on the local phone (`agentcomms call --dial`): what the phone menu says first."""
        call = f"local-{uuid.uuid4().hex}"
        prompt = await self._menu.start(call, LOCAL_PHONE, admitted=True)
        return {"call": call, **asdict(prompt)}

    @declare(Human(decides=True))
    async def phone_dial_answer(self, p: DialAnswerParams) -> dict[str, Any]:
        """A key or words said on the local phone's call: what the menu says next."""
        async with self._one_at_a_time(p.call):
            prompt = await self._menu.answer(p.call, p.step, p.text, query=p.query)
        return {"call": p.call, **asdict(prompt)}

    @declare(Human(decides=True))
    async def phone_dial_hang_up(self, p: DialHangUpParams) -> dict[str, Any]:
        """The local phone hung up mid-menu (its input ended, or Ctrl-C): the call ends as a
        Twilio call hung up on does. A call that said goodbye already stays as it ended."""
        async with self._one_at_a_time(p.call):
            ended = await self._menu.hung_up(p.call, "completed", None)
        return {"call": p.call, "ended": ended}
