"""An answer to an approval from a chat: a button press (Telegram, Discord, Slack), or a reply carrying
the approval's code ("YES K7QF", "ALWAYS K7QF", "NO K7QF not now"; any provider, made for SMS
and WhatsApp). A reply with a code is the answer and never reaches the agent's pane.

Who may answer: an allowed sender (``chat.allowed_senders`` or admitted by pairing) answering
from a chat mapped to the approval's agent, and, when ``agents.ID.approvers`` is set, listed
there too (it narrows who may answer); a listed approver may also answer from their own private
chat (their number, their chat with the bot). Anyone else's answer changes nothing: they are told so
and it is recorded with the strangers (the events projection, status ``rejected``, with the
reason; ``agentcomms events AGENT``). A stranger's is turned away before this, by the inbox
(:class:`gateway.chat.inbox.ChatInbox`), which records it the same way within its bounds.

Every answer taken goes through the approvals' one decide path (signed there, first answer
wins); the approval's history keeps each answer tried.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from agentcomms.approval_models import ApprovalView, Decision, chosen
from agentcomms.bridge.sanitize import sanitize
from agentcomms.config import Config
from agentcomms.errors import RpcError
from agentcomms.ids import new_event_id
from agentcomms.models import Event, EventStatus
from agentcomms.store import Store
from agentcomms.store.approval_posts import ApprovalPost
from agentcomms.transports import ButtonPress, InboundMessage, InboundResult, ShownInButtons
from gateway.approvals.chat_posts import ApprovalChats
from gateway.approvals.words import (
    Tick,
    chosen_option,
    coded,
    nothing_ticked,
    pressed,
    refused_answer,
    reply_with,
    said,
    shown_for,
    ticked,
    ticked_now,
    ticking,
)
from workflows.approval.client import Approvals
from workflows.approval.models import Decided

log = logging.getLogger(__name__)

Decide = Callable[[Decision], Awaitable[Decided | None]]
# Messages whose ticks this gateway keeps in mind (a selection under way is seldom older).
SHOWN_KEPT = 256
PRESS_WORDS = {"allow": "Allow", "allow_session": "Allow for this session", "deny": "Deny"}


class ChatAnswers:
    def __init__(
        self,
        cfg: Config,
        store: Store,
        approvals: Approvals,
        decide: Decide,
        chats: ApprovalChats,
    ) -> None:
        self._cfg = cfg
        self._store = store
        self._approvals = approvals
        self._decide = decide
        self._chats = chats
        # The ticks this gateway last showed under each message: presses in quick succession
        # each carry the buttons as they were before the other's edit landed, so these win over
        # the buttons sent back (which, after a restart, are all there is). One press at a time
        # per message.
        self._shown: OrderedDict[tuple[str, str, str], frozenset[int]] = OrderedDict()
        self._ticking: dict[tuple[str, str, str], asyncio.Lock] = {}

    async def button(self, press: ButtonPress) -> str:
        """An allowed sender pressed Allow, Allow for this session, Deny, or one of a question's
        options, or ticked a box of one that takes several, or pressed its Done: what they
        are told."""
        tick = ticking(press.data)
        if tick is not None:
            return await self._tick(press, tick)
        option = chosen_option(press.data)
        wanted = pressed(press.data) if option is None else (option[0], "answer")
        if wanted is None:
            return "This button is not agentcomms'."
        approval_id, behavior = wanted
        view = await self._approvals.view(approval_id)
        if view is None:
            return f"No approval {approval_id} any more."
        if not shown_for(press.data, view.request):
            return _earlier(approval_id)
        answer = None
        if option is not None:
            if view.request.ask != "question":
                return "This button is not agentcomms'."
            answer = chosen(view.request.options, str(option[1]))
        who = _who(press.sender_name or press.sender_id)
        what = PRESS_WORDS.get(behavior, answer or behavior)
        if (refused := await self._refused_press(view, press, who, what)) is not None:
            return refused
        decision = Decision(
            approval_id=approval_id, behavior=behavior, answer=answer, by=who, via=press.provider
        )
        return await self._answer(decision)

    async def _refused_press(
        self, view: ApprovalView, press: ButtonPress, who: str, what: str
    ) -> str | None:
        """What a press of someone who may not answer this approval is told (the refusal
        recorded for the human's audit), or None when they may."""
        refusal = await self.refusal(view, press.provider, press.chat_id, press.sender_id)
        if refusal is None:
            return None
        await self._record(
            new_event_id(),
            view,
            press.provider,
            press.chat_id,
            press.sender_id,
            who,
            f"pressed {what} on approval {view.request.id}",
            status="rejected",
            error=refusal,
        )
        return refused_answer(view.request.id)

    async def _tick(self, press: ButtonPress, tick: Tick) -> str:
        """A box ticked or unticked under a question that takes several options (the message's
        buttons edited to show it), or its Done: answered with the ticked options, in the
        options' order, through the one decide path."""
        approval_id = tick.approval_id
        view = await self._approvals.view(approval_id)
        if view is None:
            return f"No approval {approval_id} any more."
        request = view.request
        if not shown_for(press.data, request):
            return _earlier(approval_id)
        if request.ask != "question" or not request.multi or press.message_id is None:
            return "This button is not agentcomms'."
        if tick.option is not None and not 1 <= tick.option <= len(request.options):
            return "This button is not agentcomms'."
        who = _who(press.sender_name or press.sender_id)
        what = (
            "Done"
            if tick.option is None
            else f"{'tick' if tick.ticks else 'untick'} {request.options[tick.option - 1]}"
        )
        if (refused := await self._refused_press(view, press, who, what)) is not None:
            return refused
        if not view.open:
            return f"{approval_id} was answered already: {said(view)}"
        where = (press.provider, press.chat_id, press.message_id)
        if where not in self._ticking and len(self._ticking) >= SHOWN_KEPT:
            self._ticking = {k: v for k, v in self._ticking.items() if v.locked()}
        async with self._ticking.setdefault(where, asyncio.Lock()):
            return await self._ticked(press, tick, view, who, where)

    async def _ticked(
        self,
        press: ButtonPress,
        tick: Tick,
        view: ApprovalView,
        who: str,
        where: tuple[str, str, str],
    ) -> str:
        request = view.request
        approval_id = request.id
        ticks = self._shown.get(where)
        if ticks is None:
            ticks = ticked(approval_id, press.keyboard, len(request.options))
        if tick.option is None:
            if not ticks:
                return nothing_ticked(approval_id)
            answer = ", ".join(request.options[n - 1] for n in sorted(ticks))
            decision = Decision(
                approval_id=approval_id,
                behavior="answer",
                answer=answer,
                by=who,
                via=press.provider,
            )
            return await self._answer(decision)
        ticks = ticks | {tick.option} if tick.ticks else ticks - {tick.option}
        post = ApprovalPost(provider=where[0], chat_id=where[1], message_id=where[2])
        try:
            await self._chats.show_ticks(request, post, ticks)
        except Exception as exc:
            log.warning(
                "approval %s: ticks not shown in %s: %s", approval_id, press.channel_id, exc
            )
            return f"{approval_id}: your tick could not be shown just now: press it again."
        self._shown[where] = ticks
        self._shown.move_to_end(where)
        while len(self._shown) > SHOWN_KEPT:
            self._shown.popitem(last=False)
        # Decided while the ticks were being shown: the buttons they brought back go again.
        after = await self._approvals.view(approval_id)
        if after is not None and not after.open:
            await self._chats.settle_post(after, post)
            return f"{approval_id} was answered already: {said(after)}"
        return ShownInButtons(ticked_now(request, ticks))

    async def reply(self, message: InboundMessage, event_id: str) -> InboundResult | None:
        """An allowed sender's message that carries an approval's code, taken as the answer;
        None for any other message (it goes on to the agent)."""
        answer = coded(message.text)
        if answer is None:
            return None
        approval_id = answer.approval_id
        view = await self._approvals.view(approval_id)
        who = _who(message.sender_name or message.sender_id)

        async def record(status: EventStatus, error: str | None = None) -> None:
            await self._record(
                event_id,
                view,
                message.provider,
                message.chat_id,
                message.sender_id,
                who,
                message.text,
                status=status,
                error=error,
            )

        if view is None:
            if not answer.typed_as_code:
                return None  # "no more tests": words for the agent, not a code
            await record("rejected", f"no approval {approval_id}")
            return InboundResult(
                "refused",
                event_id=event_id,
                reply=f"There is no approval {approval_id}: check the code in the request. "
                "Nothing was passed to the agent.",
            )
        agent_id = view.request.agent_id
        refusal = await self.refusal(view, message.provider, message.chat_id, message.sender_id)
        if refusal is not None:
            await record("rejected", refusal)
            return InboundResult(
                "rejected", event_id=event_id, agent_id=agent_id, reply=refused_answer(approval_id)
            )
        is_question = view.request.ask == "question"
        if view.open and is_question != (answer.behavior == "answer" and bool(answer.reason)):
            what = "a question" if is_question else "not a question"
            await record("rejected", f"approval {approval_id} is {what}")
            return InboundResult(
                "refused",
                event_id=event_id,
                agent_id=agent_id,
                reply=f"{approval_id} is {what}: {reply_with(view.request)}",
            )
        if answer.behavior == "allow_session" and not view.request.suggestions and view.open:
            await record("rejected", f"approval {approval_id} offers nothing for the session")
            return InboundResult(
                "refused",
                event_id=event_id,
                agent_id=agent_id,
                reply=f"{approval_id} offers nothing for the session: reply YES {approval_id} "
                f"or NO {approval_id}.",
            )
        # This chat hears the outcome as the answer to its reply, not again with the others.
        await self._chats.answered_in(approval_id, message.provider, message.chat_id)
        told = await self._answer(
            Decision(
                approval_id=approval_id,
                behavior=answer.behavior,
                message=_shown(answer.reason, 2_000) if answer.reason and not is_question else None,
                answer=chosen(view.request.options, answer.reason)
                if is_question and answer.reason
                else None,
                by=who,
                via=message.provider,
            )
        )
        await record("delivered")
        return InboundResult("answered", event_id=event_id, agent_id=agent_id, reply=told)

    async def refusal(
        self, view: ApprovalView, provider: str, chat_id: str, sender_id: str
    ) -> str | None:
        """Why this sender may not answer this approval from this chat; None when they may."""
        agent_id = view.request.agent_id
        channel = f"{provider}:{chat_id}"
        sender = f"{provider}:{sender_id}"
        approvers = self._cfg.approvers(agent_id)
        # A listed approver may also answer from their own private chat (their phone number,
        # their chat with the bot), where the request may have reached them some other way.
        own_chat = approvers is not None and sender in approvers and chat_id == sender_id
        if self._cfg.chat.channels.get(channel) != agent_id and not own_chat:
            return f"{channel} is not a chat of {agent_id}"
        listed = self._cfg.chat.allowed_senders.get(provider, [])
        if sender_id not in listed and not await self._store.sender_admitted(provider, sender_id):
            return f"{sender} is not an allowed sender"
        if approvers is not None and sender not in approvers:
            return f"{sender} is not one of {agent_id}'s approvers"
        return None

    async def _answer(self, decision: Decision) -> str:
        approval_id = decision.approval_id
        try:
            decided = await self._decide(decision)
        except RpcError as exc:  # not shown whole in this chat: it says where to answer
            return f"{approval_id}: {exc.message}."
        if decided is None:
            return f"No approval {approval_id} any more."
        if decided.accepted:
            return f"{approval_id}: {said(decided.view)}"
        return f"{approval_id} was answered already: {said(decided.view)}"

    async def _record(
        self,
        event_id: str,
        view: ApprovalView | None,
        provider: str,
        chat_id: str,
        sender_id: str,
        sender_name: str,
        text: str,
        *,
        status: EventStatus,
        error: str | None = None,
    ) -> None:
        """An answer from a chat in the events projection: never a message for the agent (a
        system event), kept for the operator, and a provider's re-sent reply is seen again."""
        channel = f"{provider}:{chat_id}"
        agent_id = view.request.agent_id if view else self._cfg.chat.channels.get(channel)
        payload: dict[str, Any] = {
            "text": _shown(text, 500),
            "sender_id": sender_id,
            "sender_name": sender_name,
            "provider": provider,
            "chat_id": chat_id,
            "approval_id": view.request.id if view else None,
        }
        if status == "rejected":
            log.warning("approval answer from %s in %s refused: %s", sender_id, channel, error)
        try:
            await self._store.record_event(
                Event(
                    id=event_id,
                    agent_id=agent_id or "default",
                    channel_id=channel,
                    type="system",
                    role="human",
                    status=status,
                    error=error,
                    payload=payload,
                )
            )
        except Exception:  # the answer itself stands; only its row is missing
            log.exception("approval answer from %s in %s not recorded", sender_id, channel)


def _earlier(approval_id: str) -> str:
    """What a press on a button left under an earlier request of the same id is told."""
    return (
        f"This button was under an earlier request that was also called {approval_id}: "
        "nothing changed. Answer the request as it is now from its own message, or with "
        "`agentcomms approvals`."
    )


def _who(name: str) -> str:
    return _shown(name, 100)


def _shown(text: str, chars: int) -> str:
    return sanitize(text, max_chars=chars).text
