"""Calling in: the human phones the deployment's Twilio number and hears what waits for them.

Twilio's "A call comes in" webhook is ``server.public_url`` + ``/webhooks/twilio/voice``; every
step of the call is a webhook of its own, each checked against Twilio's signature for our public
URL (a forged one gets 403). A caller id can be spoofed, so the caller must be in
``voice.inbound.allowed_callers`` and key or say ``voice.inbound.pin``: anyone else is rejected
before the call is answered (they hear nothing, and pay nothing) or hung up on after a wrong PIN,
and recorded either way. Then a menu: the pending permission requests one by one (1 allow,
2 deny, 3 skip, by key or word, decided through the gateway's one decide path, `via` call), the
agents' last replies, and a message for an agent, recorded, transcribed by the STT chain and
posted to its mailbox like a chat message (``[phone call from +1555…] …``).

A call's progress (who called, whether the PIN was right) lives in this gateway's memory, keyed
by Twilio's call id: a gateway restarted mid-call hangs up on the next step.
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import httpx
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from agentcomms.approval_models import Behavior
from agentcomms.config import Config
from agentcomms.ids import new_event_id
from agentcomms.models import Event, utcnow
from agentcomms.store import Store
from agentcomms.voice.callsystem.twilio import TWILIO_API, signed_form
from agentcomms.voice.stt import stt_chain, stt_provider
from gateway.approval_calls import heard_answer
from workflows.approval.models import Decided

log = logging.getLogger(__name__)

INBOUND_PATH = "/webhooks/twilio/voice"
WRONG_PINS = 1  # a wrong PIN ends the call: guessing costs a call each time
MESSAGE_MAX_S = 120

Pending = Callable[[], Awaitable[list[dict[str, Any]]]]
DecideByCall = Callable[[str, Behavior, str], Awaitable[Decided | None]]
Post = Callable[[Event], Awaitable[str]]


def _xml(*verbs: str) -> Response:
    body = '<?xml version="1.0" encoding="UTF-8"?><Response>' + "".join(verbs) + "</Response>"
    return Response(body, media_type="application/xml")


def _say(text: str) -> str:
    return f"<Say>{escape(text)}</Say>"


@dataclass
class Caller:
    number: str
    admitted: bool = False
    pending: list[str] = field(default_factory=list)  # approval ids still to offer


class InboundCalls:
    def __init__(
        self, cfg: Config, store: Store, *, pending: Pending, decide: DecideByCall, post: Post
    ) -> None:
        self._cfg = cfg
        self._phone = cfg.voice.phone
        self._inbound = cfg.voice.inbound
        self._public_url = cfg.server.public_url or ""
        self._store = store
        self._pending = pending
        self._decide = decide
        self._post = post
        self._calls: dict[str, Caller] = {}

    def routes(self) -> list[BaseRoute]:
        step = f"{INBOUND_PATH}/{{step}}"
        return [
            Route(INBOUND_PATH, self._incoming, methods=["POST"]),
            Route(step, self._step, methods=["POST"]),
        ]

    def _url(self, step: str, **query: str) -> str:
        url = f"{self._public_url}{INBOUND_PATH}/{step}"
        return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")

    def _gather(self, step: str, words: str, *, digits: int = 1, **query: str) -> str:
        action = quoteattr(self._url(step, **query))
        finish = ' finishOnKey="#"' if digits > 1 else ""
        return (
            f'<Gather input="dtmf speech" numDigits="{digits}" timeout="6"{finish} '
            f'action={action} method="POST">{_say(words)}</Gather>'
        )

    # ---- webhooks -------------------------------------------------------------------------------

    async def _incoming(self, request: Request) -> Response:
        form = await signed_form(request, self._phone, self._public_url)
        if form is None:
            return PlainTextResponse("forbidden: bad or missing X-Twilio-Signature", 403)
        number, sid = form.get("From", ""), form.get("CallSid", "")
        if number not in self._inbound.allowed_callers or self._inbound.pin is None:
            await self._record_stranger(number, sid, "not in voice.inbound.allowed_callers")
            return _xml('<Reject reason="rejected"/>')
        self._calls[sid] = Caller(number=number)
        return _xml(
            self._gather("pin", "Enter your PIN, then press the pound key.", digits=12),
            "<Hangup/>",
        )

    async def _step(self, request: Request) -> Response:
        form = await signed_form(request, self._phone, self._public_url)
        if form is None:
            return PlainTextResponse("forbidden: bad or missing X-Twilio-Signature", 403)
        caller = self._calls.get(form.get("CallSid", ""))
        step = request.path_params["step"]
        if caller is None:
            return _xml("<Hangup/>")
        heard = form.get("Digits") or form.get("SpeechResult") or ""
        if step == "pin":
            return await self._pin(form, caller, heard)
        if not caller.admitted:
            return _xml("<Hangup/>")
        if step == "menu":
            return await self._menu(caller, heard)
        if step == "approval":
            return await self._approval(caller, request.query_params.get("id", ""), heard)
        if step == "agent":
            return await self._agent(heard)
        if step == "message":
            agent = request.query_params.get("agent", "")
            return await self._message(caller, agent, form)
        return _xml("<Hangup/>")

    # ---- steps ----------------------------------------------------------------------------------

    async def _pin(self, form: dict[str, str], caller: Caller, heard: str) -> Response:
        entered = "".join(re.findall(r"\d", heard))
        pin = self._inbound.pin
        assert pin is not None
        if not hmac.compare_digest(entered.encode(), pin.get_secret_value().encode()):
            self._calls.pop(form.get("CallSid", ""), None)
            await self._record_stranger(caller.number, form.get("CallSid", ""), "a wrong PIN")
            return _xml(_say("Goodbye."), "<Hangup/>")
        caller.admitted = True
        caller.pending = [a["id"] for a in await self._pending()]
        return self._menu_prompt(caller, "")

    def _menu_prompt(self, caller: Caller, before: str) -> Response:
        count = len(caller.pending)
        waiting = f"{count} request{'s' if count != 1 else ''} waiting for you. "
        words = (
            before + waiting + "Press 1 to hear them, 2 for the agents' last replies, "
            "3 to leave a message for an agent."
        )
        return _xml(self._gather("menu", words), "<Hangup/>")

    async def _menu(self, caller: Caller, heard: str) -> Response:
        choice = _first_digit(heard)
        if choice == "1":
            return await self._offer(caller, "")
        if choice == "2":
            return self._menu_prompt(caller, await self._replies())
        if choice == "3":
            agents = self._agents()
            names = ", ".join(f"{n} for {a}" for n, a in enumerate(agents, start=1))
            return _xml(self._gather("agent", f"Which agent? Press {names}."), "<Hangup/>")
        return self._menu_prompt(caller, "")

    async def _offer(self, caller: Caller, before: str) -> Response:
        """The next pending request, or the menu when none is left."""
        pending = {a["id"]: a for a in await self._pending()}
        caller.pending = [i for i in caller.pending if i in pending]
        if not caller.pending:
            return self._menu_prompt(caller, before + "No more requests. ")
        request = pending[caller.pending[0]]
        verb = "run" if request["tool"] == "Bash" else f"use {request['tool']}:"
        words = (
            f"{before}{request['agent_id']} asks to {verb} {request['input']}. "
            "Press 1 to allow, 2 to deny, 3 to skip."
        )
        return _xml(self._gather("approval", words, id=request["id"]), "<Hangup/>")

    async def _approval(self, caller: Caller, approval_id: str, heard: str) -> Response:
        if approval_id in caller.pending:
            caller.pending.remove(approval_id)
        behavior = heard_answer(heard)
        if behavior is None:
            return await self._offer(caller, "Skipped. ")
        decided = await self._decide(approval_id, behavior, caller.number)
        if decided is None or not decided.accepted:
            return await self._offer(caller, "That one was answered already. ")
        return await self._offer(caller, "Allowed. " if behavior == "allow" else "Denied. ")

    def _agents(self) -> list[str]:
        return sorted(set(self._cfg.agents) | set(self._cfg.chat.channels.values()))

    async def _agent(self, heard: str) -> Response:
        agents = self._agents()
        choice = _first_digit(heard)
        if not choice.isdigit() or not 1 <= int(choice) <= len(agents):
            return _xml(_say("No such agent. Goodbye."), "<Hangup/>")
        agent = agents[int(choice) - 1]
        action = quoteattr(self._url("message", agent=agent))
        return _xml(
            _say(f"Leave your message for {agent} after the tone, then press pound."),
            f'<Record action={action} method="POST" maxLength="{MESSAGE_MAX_S}" '
            'finishOnKey="#" playBeep="true" trim="trim-silence"/>',
            "<Hangup/>",
        )

    async def _message(self, caller: Caller, agent: str, form: dict[str, str]) -> Response:
        if agent not in self._agents():
            return _xml("<Hangup/>")
        text = await self._transcribe(form.get("RecordingUrl", ""))
        if not text:
            return self._menu_prompt(caller, "Your message could not be heard. ")
        event = Event(
            id=new_event_id(),
            agent_id=agent,
            channel_id=f"phone:{caller.number}",
            type="human_message",
            role="human",
            payload={
                "text": f"[phone call from {caller.number}] {text}",
                "provider": "phone",
                "sender_id": caller.number,
                "sender_name": caller.number,
            },
        )
        await self._post(event)
        return self._menu_prompt(caller, f"Your message for {agent} was sent. ")

    async def _replies(self) -> str:
        said = []
        for agent in self._agents():
            for event in await self._store.latest_events(agent, 50):
                if event.direction == "out" and event.type == "agent_message":
                    said.append(f"{agent} said: {event.text}.")
                    break
        return " ".join(said) + " " if said else "No agent has replied yet. "

    async def _transcribe(self, url: str) -> str:
        """The recording's words, by the STT chain (the first provider that hears them)."""
        phone = self._phone
        if not url.startswith((phone.base_url or TWILIO_API).rstrip("/")):
            return ""
        assert phone.account_sid is not None and phone.auth_token is not None
        async with httpx.AsyncClient(timeout=30) as client:
            got = await client.get(
                url + ".wav", auth=(phone.account_sid, phone.auth_token.get_secret_value())
            )
        if got.status_code != 200:
            return ""
        for provider in stt_chain(self._cfg):
            try:
                text = await stt_provider(provider, self._cfg).transcribe(got.content, "audio/wav")
            except Exception as exc:  # the next provider of the chain
                log.warning("inbound message: %s did not hear it: %s", provider, exc)
                continue
            if text.strip():
                return text.strip()
        return ""

    async def _record_stranger(self, number: str, sid: str, why: str) -> None:
        """A caller who may not in: recorded for the operator's audit, never for an agent."""
        log.info("refused an inbound call from %s: %s", number or "an unknown number", why)
        await self._store.record_event(
            Event(
                id=new_event_id(),
                agent_id="default",
                channel_id=f"phone:{number or 'unknown'}",
                type="human_message",
                role="human",
                status="rejected",
                error=f"inbound call from {number or 'an unknown number'} refused: {why}",
                payload={"text": "", "provider": "phone", "sender_id": number, "call_sid": sid},
                created_at=utcnow(),
            )
        )


def _first_digit(heard: str) -> str:
    words = {"one": "1", "two": "2", "three": "3", "four": "4", "five": "5"}
    found = re.findall(r"[a-z]+|\d", heard.lower())
    return words.get(found[0], found[0]) if found else ""
