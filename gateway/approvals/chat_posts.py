"""An approval in the agent's chats: the request posted to each chat mapped to the agent, and,
once decided, each chat told how (:mod:`gateway.approvals.words` holds the words).

- Telegram, Discord and Slack: the request with buttons (Allow, Allow for this session where offered,
  Deny); once decided, the message with the buttons is edited to say who answered, how and
  where, its buttons gone.
- SMS, WhatsApp, IRC and email: the request with a code to reply with ("Reply YES K7QF or NO
  K7QF"), an email also with a one-time link to the published console
  (:mod:`gateway.approvals.email_links`); once
  decided, each of these chats gets one line saying how, except the one whose reply decided it
  (that reply was answered already).
- ntfy: a notification with a button per answer, each a one-time signed link to the gateway
  (:mod:`gateway.approvals.push`); once decided, a short notification saying how.

A request is shown whole wherever a chat can show it (a plan runs to tens of thousands of
characters), each provider its own way:

- Telegram: in pieces at its 4,096-character limit, the buttons under the last. Most plans fit
  in one or two messages; a message reads where it arrives, where a document would open in
  another viewer, away from the buttons.
- Slack: each approval a thread of its own. Its first message, in the channel, shows the start
  of the request (3,000 characters, a Block Kit section's, as plain text) with the buttons; the
  rest follows in its thread, and once decided the thread is told how, as the first message is
  updated. A channel with several agents' approvals keeps each apart from the others and from
  the conversation.
- Discord: one message with the buttons, showing the start, and the whole request attached as
  a text file. At 2,000 characters a plan would run to many messages, mixed with whatever else
  the channel says; Discord previews a text file in the channel and opens it whole in place.
- SMS and WhatsApp: the first part and where to read the rest (`agentcomms approvals`, the
  console), as a long mirrored reply is sent: every text is billed, and a phone may show the
  parts of a long one out of order.

Which message shows which approval is kept in the projection (:mod:`agentcomms.store.approval_posts`),
so an approval decided after a gateway restart still clears every chat's buttons.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from typing import Any, Protocol, cast

from agentcomms.approval_models import ApprovalRequest, ApprovalView
from agentcomms.config import Config
from agentcomms.models import utcnow
from agentcomms.store import Store
from agentcomms.store.approval_posts import ApprovalPost
from agentcomms.transports import (
    Sender,
    TextSender,
    abilities,
    as_agent,
    first_part,
    load,
    split_text,
)
from agentcomms.transports.ntfy import NtfySender
from gateway.approvals.email_links import LINKED, link
from gateway.approvals.push import ActionTokens, notification
from gateway.approvals.words import (
    ASKED,
    TEXT_REQUEST_CHARS,
    asks,
    buttons,
    footer,
    hidden_on,
    outcome,
    reply_with,
    settled_footer,
    shown_remotely,
    the_rest,
)

log = logging.getLogger(__name__)

# Of a chat's limit, what is kept for the lines under a request (its id, how to answer; once
# decided, who answered how), so the pieces before stay the same when the last is edited.
FOOTER_ROOM = 400
CONTINUED = "[…continued in this message's thread]"
DECIDED_KEPT = 256


class ButtonSender(TextSender, Protocol):
    """A provider whose messages carry buttons and can be edited."""

    async def send_buttons(
        self, chat_id: str, text: str, buttons: list[tuple[str, str]]
    ) -> str: ...

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None: ...

    async def edit_buttons(
        self, chat_id: str, message_id: str, buttons: list[tuple[str, str]]
    ) -> None: ...


class AttachingSender(ButtonSender, Protocol):
    """A provider whose message with buttons can carry a text file, (name, text)."""

    async def send_buttons(
        self,
        chat_id: str,
        text: str,
        buttons: list[tuple[str, str]],
        *,
        attached: tuple[str, str] | None = None,
    ) -> str: ...


class ApprovalChats:
    def __init__(
        self, cfg: Config, store: Store, tokens: ActionTokens, links: ActionTokens | None = None
    ) -> None:
        self._cfg = cfg
        self._store = store
        self._tokens = tokens
        self._links = links  # an email's one-time links to the published console
        self._senders: dict[str, Sender] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        # Approvals decided here lately: one decided while its request was still being posted
        # is settled again once the posts are recorded, so no button outlives its decision.
        self._decided: OrderedDict[str, ApprovalView] = OrderedDict()

    def announce(self, request: ApprovalRequest) -> None:
        """Post the request to the agent's chats, beside the hook's wait (never holding it)."""
        self._spawn(self._announce(request))

    def settle(self, view: ApprovalView) -> None:
        """Tell each chat that was shown the request how it was decided; once, whichever
        gateway (or this one before a restart) posted it."""
        self._decided[view.request.id] = view
        while len(self._decided) > DECIDED_KEPT:
            self._decided.popitem(last=False)
        self._spawn(self._settle(view))

    async def answered_in(self, approval_id: str, provider: str, chat_id: str) -> None:
        """A chat of plain text answered: its reply is answered there, so `settle` skips it."""
        if abilities(provider).answers != "codes":
            return
        try:
            await self._store.drop_approval_post(approval_id, provider, chat_id)
        except Exception as exc:  # the chat hears the outcome twice, nothing worse
            log.warning("approval %s: %s:%s not forgotten: %s", approval_id, provider, chat_id, exc)

    async def show_ticks(
        self, request: ApprovalRequest, post: ApprovalPost, ticks: frozenset[int]
    ) -> None:
        """Show a question's options `ticks` ticked under its message in a chat with buttons."""
        sender = cast(ButtonSender, self._sender(post.provider))
        await sender.edit_buttons(post.chat_id, post.message_id, buttons(request, ticks))

    async def settle_post(self, view: ApprovalView, post: ApprovalPost) -> None:
        """Tell one chat how it was decided: its buttons, shown again by a press that crossed
        the decision, go (its thread was told already)."""
        await self._tell(view, post, thread=False)

    async def drain(self) -> None:
        """Wait for the posts and edits under way (a test, or the gateway closing)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        await self.drain()
        senders, self._senders = self._senders, {}
        for sender in senders.values():
            try:
                await sender.close()
            except Exception as exc:
                log.warning("approvals: a chat sender did not close: %s", exc)

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _sender(self, provider: str) -> Sender:
        # One per provider for the gateway's life: Discord's logs in once.
        if provider not in self._senders:
            self._senders[provider] = load(provider).sender(self._cfg)
        return self._senders[provider]

    def _chats(self, agent_id: str) -> list[tuple[str, str]]:
        chats = []
        for channel_id, agent in self._cfg.chat.channels.items():
            provider, _, chat = channel_id.partition(":")
            if agent != agent_id or abilities(provider).answers == "none":
                continue
            if self._cfg.chat.provider(provider).enabled:
                chats.append((provider, chat))
        return chats

    async def _announce(self, request: ApprovalRequest) -> None:
        for provider, chat in self._chats(request.agent_id):
            try:
                message_id = await self._post(provider, chat, request)
            except Exception as exc:
                log.warning("approval %s: not posted to %s:%s: %s", request.id, provider, chat, exc)
                continue
            post = ApprovalPost(provider=provider, chat_id=chat, message_id=message_id)
            try:
                await self._store.record_approval_post(request.id, post, utcnow())
            except Exception as exc:  # the request stands; only its edit, once decided, is lost
                log.warning(
                    "approval %s: %s:%s's post not recorded: %s", request.id, provider, chat, exc
                )
        if (decided := self._decided.get(request.id)) is not None:
            await self._settle(decided)

    async def _post(self, provider: str, chat: str, request: ApprovalRequest) -> str:
        sender = as_agent(self._sender(provider), request.agent_id)
        if abilities(provider).answers == "push":
            note = notification(self._cfg, self._tokens, request, chat)
            return await cast(NtfySender, sender).publish(chat, note)
        # Not shown whole here (a secret hidden, too long): no code and no buttons, as if
        # complete; the chat says where to answer instead.
        hidden = hidden_on(request, provider)
        if abilities(provider).answers != "buttons":
            asked = asks(shown_remotely(request))
            shown = (
                asked
                if abilities(provider).whole_text
                else first_part(asked, TEXT_REQUEST_CHARS, the_rest(request))
            )
            answer = reply_with(request, hidden=hidden)
            opens = None
            if self._links is not None and provider == LINKED:
                opens = link(self._cfg, self._links, request, chat)
            if opens is not None:
                answer += f"\nOr answer it in the console, once: {opens}"
            return await sender.send_text(chat, f"{shown}\n\n{answer}")
        under = footer(request)
        if hidden is not None:
            under = f"(approval {request.id})\n{reply_with(request, hidden=hidden)}"
        offered = buttons(request) if hidden is None else []
        if abilities(provider).threads:
            root, rest = threaded_with_buttons(request, under, sender.max_chars)
            root_id = await (
                cast(ButtonSender, sender).send_buttons(chat, root, offered)
                if offered
                else sender.send_text(chat, root)
            )
            for piece in rest:
                await sender.send_text(chat, piece, reply_to=root_id)
            return root_id
        pieces, attached = shown_with_buttons(request, under, provider, sender.max_chars)
        for piece in pieces[:-1]:
            await sender.send_text(chat, piece)
        if attached is not None:
            return await cast(AttachingSender, sender).send_buttons(
                chat, pieces[-1], offered, attached=attached
            )
        if not offered:
            return await sender.send_text(chat, pieces[-1])
        return await cast(ButtonSender, sender).send_buttons(chat, pieces[-1], offered)

    async def _settle(self, view: ApprovalView) -> None:
        r = view.request
        try:
            posts = await self._store.take_approval_posts(r.id)
        except Exception as exc:  # kept: a later settle (the hook's wait, a restart) takes them
            log.warning("approval %s: the chats' posts could not be read: %s", r.id, exc)
            return
        for post in posts:
            await self._tell(view, post)

    async def _tell(self, view: ApprovalView, post: ApprovalPost, *, thread: bool = True) -> None:
        r = view.request
        provider, chat = post.provider, post.chat_id
        sender = as_agent(self._sender(provider), r.agent_id)
        try:
            if abilities(provider).threads:
                root, _ = threaded_with_buttons(r, settled_footer(view), sender.max_chars)
                await cast(ButtonSender, sender).edit_text(chat, post.message_id, root)
                if thread:  # those who follow the thread hear how it ended
                    await sender.send_text(chat, outcome(view), reply_to=post.message_id)
            elif abilities(provider).answers == "buttons":
                pieces, _ = shown_with_buttons(r, settled_footer(view), provider, sender.max_chars)
                await cast(ButtonSender, sender).edit_text(chat, post.message_id, pieces[-1])
            else:
                # An email says how it ended in the thread of the request.
                threaded = post.message_id if abilities(provider).whole_text else None
                await sender.send_text(chat, outcome(view), reply_to=threaded)
        except Exception as exc:
            log.warning("approval %s: %s:%s not told: %s", r.id, provider, chat, exc)


def shown_with_buttons(
    request: ApprovalRequest, under: str, provider: str, max_chars: int
) -> tuple[list[str], tuple[str, str] | None]:
    """The messages that show `request` whole in a chat with buttons, `under` it (the buttons
    go on the last), and the file attached to the last, (name, text), where the provider takes
    the whole as a file. What looks like a secret is hidden, saying so in place."""
    whole = asks(shown_remotely(request))
    room = max_chars - FOOTER_ROOM
    can = abilities(provider)
    shown = discord_literal(whole) if can.markdown else whole
    if can.attaches_long and len(shown) > room:
        name = f"{ASKED[request.ask]}-{request.id}.{'md' if request.ask == 'plan' else 'txt'}"
        start = first_part(shown, room, f" […] (the whole {ASKED[request.ask]}: {name})")
        return [f"{start}\n\n{under}"], (name, whole)  # a file is shown as plain text
    pieces = split_text(shown, room)
    pieces[-1] = f"{pieces[-1]}\n\n{under}"
    return pieces, None


def threaded_with_buttons(
    request: ApprovalRequest, under: str, max_chars: int
) -> tuple[str, list[str]]:
    """Where each approval is a thread of its own: the message that starts it (the request's
    start, `under` it, the buttons on it) and the rest of the request, in order, for its
    thread. What looks like a secret is hidden, saying so in place."""
    pieces = split_text(asks(shown_remotely(request)), max_chars - FOOTER_ROOM)
    if len(pieces) == 1:
        return f"{pieces[0]}\n\n{under}", []
    return f"{pieces[0]}\n\n{CONTINUED}\n\n{under}", pieces[1:]


# Discord renders a message's content as markdown: a spoiler (||…||) draws text as a bar, a
# masked link ([shown](real)) shows other words than it holds, <@id> and <t:…> become a name and
# a date. Backslash before every ASCII punctuation mark shows each as itself.
_DISCORD_MARKUP = re.compile(r"([!-/:-@\[-`{-~])")


def discord_literal(text: str) -> str:
    """`text` as Discord shows it character for character, none of it read as markdown."""
    return _DISCORD_MARKUP.sub(r"\\\1", text)
