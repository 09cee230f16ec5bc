"""The socket methods: the ones scripts and existing MCP setups already call (same names and
parameters), agent registration and the human's inbox, and what the MCP tools need.

Each method is declared where it is written (`@declare(who)`: :mod:`gateway.socket.declare`),
takes its params model (`gateway.socket.params`) and returns plain JSON-able data.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import cached_property
from typing import Any

from temporalio.service import RPCError

from agentcomms import transports
from agentcomms.bridge.screen_state import ScreenCheck
from agentcomms.config import Config, host_name
from agentcomms.errors import EventNotFound, MailboxFull, RpcError, TraceNotFound
from agentcomms.ids import new_event_id
from agentcomms.models import LOCAL_CHANNEL, Event, utcnow
from agentcomms.outbox_models import ChatSend, OutboxItem
from agentcomms.store import Store
from agentcomms.store.engine import display_url
from agentcomms.temporal import poll_silence_s, pollers
from agentcomms.workflow_ids import host_task_queue
from gateway.agents.budget import Budgets
from gateway.agents.hosts import HostWatch, hosts_down
from gateway.chat.inbox import ChatTransports
from gateway.messages.files import files_for_reply
from gateway.messages.trace import Tracer
from gateway.socket.confine import own_history, to_own_chat, without_refused
from gateway.socket.declare import Anyone, ForItself, Human, declare
from gateway.socket.params import (
    AgentMessageParams,
    AgentsParams,
    CheckMessagesParams,
    EventsParams,
    HistoryParams,
    InboxParams,
    InterruptParams,
    NoParams,
    ReplyParams,
    SendParams,
    TraceParams,
    UnregisterParams,
    WaitMessagesParams,
)
from gateway.socket.protocol import INTERNAL_ERROR, INVALID_PARAMS, MAILBOX_FULL, NOT_FOUND
from gateway.socket.results import (
    AgentMessagePosted,
    Agents,
    Escalating,
    Events,
    History,
    Pong,
    Posted,
    Replied,
    Status,
    Unread,
    Waited,
    agent_json,
    event_json,
)
from gateway.socket.table import temporal_trouble
from workflows.mailbox.client import Mailbox
from workflows.outbox.client import Outbox

# A message posted through this gateway wakes `wait_messages` at once; this slow poll of the
# projection catches rows written elsewhere (a mailbox rewriting a row the gateway failed to
# insert). Polling every 0.1 s cost 17% of a core for 20 idle waiting agents.
WAIT_POLL_S = 2.0


class Methods:
    """The socket's own methods: what scripts and the MCP tools ask of messages and agents."""

    def __init__(
        self,
        cfg: Config,
        store: Store,
        mailbox: Mailbox,
        started_at: datetime,
        *,
        host: str | None = None,
        outbox: Outbox | None = None,
        chat: ChatTransports | None = None,
        on_urgent: Callable[[str, str, str], Awaitable[Escalating]] | None = None,
        screen: ScreenCheck,
        console: Callable[[], str | None] = lambda: None,
        own_dialog: Callable[[str], str | None] = lambda _: None,
    ) -> None:
        self._cfg = cfg
        self._outbox = outbox
        self._chat = chat
        self._host = host or host_name()
        self._user = getpass.getuser()  # once: the lookup cost about 40 µs of CPU per send
        self._store = store
        self._mailbox = mailbox
        self._started_at = started_at
        self._tracer = Tracer(cfg, store, mailbox, self._host)
        # An urgent message's ladder (gateway/messages/urgent.py), started once the message is sent.
        self._on_urgent = on_urgent
        self._hosts = HostWatch(mailbox.client, store, poll_silence_s(cfg.temporal))
        # A busy or waiting state no hook confirmed lately is read off its pane before it is
        # shown: Claude Code's own dialogs in auto mode, and Esc, send no hook.
        self._screen = screen
        # Where the console listens, once it does (its token is never said here: an agent's
        # MCP server asks `status` too).
        self._console = console
        # The approval an agent's own dialog (Claude Code's in auto mode) was asked as, while
        # it is on screen: what the agent waits for is that approval, answered from anywhere.
        self._own_dialog = own_dialog

    # ---- what scripts and existing MCP setups call ---------------------------------------------

    @declare(Anyone())
    async def ping(self, _: NoParams) -> Pong:
        """Whether the gateway answers: `{"pong": true}`."""
        return {"pong": True}

    @declare(Anyone())
    async def status(self, _: NoParams) -> Status:
        """The deployment at a glance: Temporal, the workers' hosts, the providers' connections,
        the agents and the console's address."""
        agents = await self._listed_agents(include_offline=True)
        return {
            "running": True,
            "started_at": self._started_at.isoformat(),
            "agents": len(agents),
            "agents_online": sum(1 for a in agents if a["status"] == "online"),
            "agent_states": {a["id"]: a.get("state", "unknown") for a in agents},
            "agents_broken": {a["id"]: a["last_error"] for a in agents if a["status"] == "broken"},
            "hosts_down": hosts_down(agents),
            "providers": self._providers(),
            "workers": await self._workers(),
            "host": self._host,
            "temporal": self._cfg.temporal.address,
            "database": display_url(self._cfg.database.resolved_url()),
            "console": self._console(),
        }

    @declare(Anyone())
    async def agents(self, p: AgentsParams) -> Agents:
        """The registered agents with their state (pane-confirmed where a hook's word is old), host
        and pane."""
        return {"agents": await self._listed_agents(include_offline=p.include_offline)}

    async def _listed_agents(self, *, include_offline: bool) -> list[dict[str, Any]]:
        """The projection's agents, with those whose host's worker is down marked unreachable
        and those whose workflow Temporal reports failing marked broken (neither mailbox can
        write its own row)."""
        # What Temporal says of failing mailboxes does not wait for the projection's read.
        broken = asyncio.create_task(self._mailbox.broken())
        try:
            listed = await self._store.list_agents(include_offline=include_offline)
            (down, waiting), seen = await asyncio.gather(
                self._hosts.down(listed), self._screen.confirmed(listed)
            )
        except BaseException:
            broken.cancel()
            raise
        agents = {a.id: agent_json(a, seen.get(a.id)) for a in listed}
        for a in listed:
            if (asked := self._own_dialog(a.id)) is not None:
                agents[a.id] |= {
                    "state": "waiting",
                    "waiting_for": f"its own dialog, asked as approval {asked} (answer it from "
                    "any surface, or in the terminal)",
                }
            if a.id in waiting:  # what waits now, also while a backlog is being typed
                agents[a.id]["pending"] = waiting[a.id]
            if (host_down := down.get(a.host or "")) and a.status != "offline":
                agents[a.id] |= {
                    "status": "unreachable",
                    "unreachable_since": host_down.since.isoformat(timespec="seconds"),
                    "last_error": host_down.reason(),
                }
        for agent_id, reason in (await broken).items():
            row = agents.setdefault(
                agent_id,
                {"id": agent_id, "type": "tmux", "target": None, "pending": None, "host": None},
            )
            row |= {"status": "broken", "last_error": reason}
        return sorted(agents.values(), key=lambda a: a["id"])

    @declare(Human())
    async def send(self, p: SendParams) -> Posted:
        """Post a message to an agent's mailbox, typed into its pane with the human's header; with
        `wait`, until it was typed (`submitted`) or `timeout` passed."""
        event = Event(
            id=p.event_id or new_event_id(),
            agent_id=p.agent_id,
            channel_id=LOCAL_CHANNEL,
            type="human_message",
            role="human",
            # Only this user reaches the socket (0600): the pane's header names them.
            payload={"text": p.message, "source": "cli", "sender_name": self._user},
        )
        return await self._post(event, wait=p.wait, wait_s=p.timeout)

    @declare(Human())
    async def interrupt(self, p: InterruptParams) -> Posted:
        """Interrupt an agent's turn (its Esc key), through its mailbox."""
        await self._known_agent(p.agent_id)
        event = Event(
            id=new_event_id(),
            agent_id=p.agent_id,
            channel_id=LOCAL_CHANNEL,
            type="interrupt",
            role="human",
            payload={"reason": p.reason, "source": "cli"},
        )
        return await self._post(event, wait=p.wait, wait_s=p.timeout)

    @declare(ForItself("agent_id"), check=without_refused)
    async def events(self, p: EventsParams) -> Events:
        """An agent's events (messages in and out, states, approvals), oldest first."""
        if p.since is not None and await self._store.get_event(p.since) is None:
            raise RpcError(NOT_FOUND, f"no event {p.since!r}; `since` takes an event id")
        if p.since is None and await self._store.get_agent(p.agent_id) is None:
            if not await self._store.latest_events(p.agent_id, 1):
                raise RpcError(NOT_FOUND, f"unknown agent {p.agent_id!r}; see `agentcomms agents`")
        if p.tail and p.since is None:
            latest = await self._store.latest_events(p.agent_id, p.limit, rejected=p.rejected)
            events = list(reversed(latest))
        else:
            try:
                events = await self._store.events_after(
                    p.agent_id, p.since, p.limit, rejected=p.rejected
                )
            except EventNotFound:
                raise RpcError(
                    NOT_FOUND, f"event {p.since!r} is not one of {p.agent_id}'s events"
                ) from None
        return {"events": [event_json(e) for e in events], "agent_id": p.agent_id}

    @declare(ForItself("agent_id"), check=to_own_chat)
    async def reply(self, p: ReplyParams) -> Replied:
        """An agent's message to the chat that wrote to it (or a chat it names that is mapped to
        it)."""
        sent = await self._reply(p)
        if p.urgent and self._on_urgent is not None:
            ladder = await self._on_urgent(p.agent_id or "default", sent["event_id"], p.message)
            sent["escalation"] = ladder["escalation"]
            if "note" in ladder:
                sent["note"] = ladder["note"]
        return sent

    async def _reply(self, p: ReplyParams) -> Replied:
        provider, sep, chat_id = p.channel_id.partition(":")
        if not sep or not chat_id:
            raise RpcError(INVALID_PARAMS, "channel_id: expected PROVIDER:ID, e.g. cli:local")
        if p.channel_id != LOCAL_CHANNEL:
            return await self._chat_reply(p, provider, chat_id)
        if p.files:
            raise RpcError(INVALID_PARAMS, f"files: {LOCAL_CHANNEL} carries no files; a chat does")
        now = utcnow()
        # The local inbox is the store itself: written is delivered.
        event = _reply_event(
            p, provider, status="delivered", attempts=1, created_at=now, delivered_at=now
        )
        await self._store.record_event(event)
        return {"event_id": event.id, "delivered": True}

    @declare(Anyone())
    async def channels(self, _: NoParams) -> dict[str, Any]:
        """The chat channels: each provider's connection and which agent each chat is mapped to."""
        channels = await self._store.list_channels()
        rows = [c.model_dump() for c in channels]
        if not any(c.channel_id == LOCAL_CHANNEL for c in channels):
            rows.insert(0, {"channel_id": LOCAL_CHANNEL, "agent_id": None, "provider": "cli"})
        # Each channel with its provider's connection: a mapped chat on a provider that is
        # reconnecting says so here.
        status = {p["name"]: p for p in self._providers()}
        for row in rows:
            link = status.get("local" if row["provider"] == "cli" else row["provider"])
            row["status"] = link["status"] if link else "unknown"
            if link and link.get("error"):
                row["error"] = link["error"]
        return {"channels": rows}

    @declare(ForItself("from_agent_id"))
    async def agent_message(self, p: AgentMessageParams) -> AgentMessagePosted:
        """One agent's message to another, typed into the other's pane with a header naming the
        sender."""
        event = Event(
            id=new_event_id(),
            agent_id=p.to_agent_id,
            channel_id=f"agent:{p.from_agent_id}",
            type="agent_message",
            role="agent",
            source_agent_id=p.from_agent_id,
            payload={"text": p.message},
        )
        result = await self._post(event, wait=p.wait, wait_s=p.timeout)
        return {**result, "to_agent_id": p.to_agent_id}

    # ---- registration and the human's inbox ----------------------------------------------------

    @declare(Human())
    async def unregister(self, p: UnregisterParams) -> dict[str, Any]:
        """Forget where an agent runs (its pane); what is sent to it then waits in its mailbox."""
        await self._known_agent(p.agent_id)
        await self._mailbox.unregister(p.agent_id)
        return {"agent_id": p.agent_id, "registered": False}

    @declare(Human())
    async def inbox(self, p: InboxParams) -> dict[str, Any]:
        """What agents said to the terminal's own chat (`cli:local`): `agentcomms inbox`."""
        try:
            history = await self._store.channel_history(
                LOCAL_CHANNEL, p.limit, direction="out", after_id=p.since
            )
        except EventNotFound:
            raise RpcError(NOT_FOUND, f"no event {p.since!r}; `since` takes an event id") from None
        return {"messages": [event_json(e) for e in history]}

    @declare(Human())
    async def trace(self, p: TraceParams) -> dict[str, Any]:
        """One message's life, oldest first, and why it waits if it does."""
        try:
            return await self._tracer.trace(p.event_id)
        except TraceNotFound as exc:
            raise RpcError(NOT_FOUND, str(exc)) from None

    # ---- chat: outbound ------------------------------------------------------------------------

    async def _chat_reply(self, p: ReplyParams, provider: str, chat_id: str) -> Replied:
        """An agent's message to a chat: recorded, queued in its (agent, chat) outbox, and
        (with ``wait``) reported once the provider took it or refused it."""
        if provider not in transports.CHAT_PROVIDERS:
            known = ", ".join(f"{n}:CHAT" for n in transports.CHAT_PROVIDERS)
            raise RpcError(
                INVALID_PARAMS,
                f"channel_id: unknown provider {provider!r}; use {LOCAL_CHANNEL}, {known}",
            )
        if not self._cfg.chat.provider(provider).enabled:
            raise RpcError(
                NOT_FOUND,
                f"cannot send to {p.channel_id}: {provider} is not enabled; set "
                f"chat.{provider}.enabled (and its credentials) in the config, then restart "
                "agentcomms",
            )
        assert self._outbox is not None, "a gateway serving chat has an outbox"
        agent_id = p.agent_id or "default"
        if transports.abilities(provider).budgeted:  # billed: counted against the budget
            await Budgets(self._cfg, self._store).spend(agent_id, "texts")
        files = await files_for_reply(
            self._cfg, self._store, self._mailbox, self._host, agent_id, provider, p.files
        )
        event = _reply_event(p, provider, chat_id)
        if files:
            event.payload["files"] = [f.path for f in files]
        send = ChatSend(
            provider=provider, chat_id=chat_id, text=p.message, reply_to=p.reply_to, files=files
        )
        item = OutboxItem(id=event.id, send=send, event=event)
        try:
            await self._outbox.post(agent_id, p.channel_id, item)
        except RPCError as exc:
            raise RpcError(
                INTERNAL_ERROR, f"nothing was sent or queued: {self._temporal_trouble(exc)}"
            ) from None
        # After the signal, as for inbound messages: the outbox writes the row again when it
        # settles, so a lost write here loses nothing.
        await self._store.record_event(event)
        result: Replied = {"event_id": event.id, "delivered": False, "status": "queued"}
        if p.wait:
            sent = await self._outbox.wait_sent(agent_id, p.channel_id, event.id, p.timeout)
            result["delivered"] = sent.status == "sent"
            result["status"] = "delivered" if sent.status == "sent" else sent.status
            if sent.message_id:
                result["message_id"] = sent.message_id
            if sent.error:
                result["error"] = sent.error
        return result

    # ---- helpers ---------------------------------------------------------------------------------

    def _temporal_trouble(self, exc: RPCError) -> str:
        return temporal_trouble(self._cfg.temporal.address, exc)

    async def _post(self, event: Event, *, wait: bool, wait_s: float) -> Posted:
        try:
            await self._mailbox.post(event)
        except MailboxFull as exc:
            raise RpcError(MAILBOX_FULL, str(exc)) from None
        except RPCError as exc:
            raise RpcError(
                INTERNAL_ERROR,
                f"{event.id} was not accepted, nothing was queued: {self._temporal_trouble(exc)}. "
                "Send it again (with the same event id) once Temporal answers.",
            ) from None
        result: Posted = {"event_id": event.id, "delivered": False, "status": "queued"}
        if wait:
            outcome = await self._mailbox.wait_delivered(event.agent_id, event.id, wait_s)
            result["status"] = "submitted" if outcome.submitted else outcome.status
            result["delivered"] = outcome.status == "delivered"
            if outcome.error:
                result["error"] = outcome.error
            if outcome.note:
                result["note"] = outcome.note
        return result

    async def _known_agent(self, agent_id: str) -> None:
        # The projection may lag a just-created mailbox by a moment; the workflow is the truth.
        if await self._store.get_agent(agent_id) is None and (
            await self._mailbox.snapshot(agent_id) is None
        ):
            raise RpcError(NOT_FOUND, f"unknown agent {agent_id!r}; see `agentcomms agents --all`")

    async def _workers(self) -> dict[str, list[str]] | None:
        """Who polls this host's queue and the shared one (None when Temporal cannot say)."""
        queues = [host_task_queue(self._host), self._cfg.temporal.task_queue]
        try:
            return {q: await pollers(self._mailbox.client, q) for q in queues}
        except RPCError:
            return None

    def _providers(self) -> list[dict[str, Any]]:
        if self._chat is None:  # a gateway without chat (tests of the socket alone)
            return [{"name": n, "status": "disabled"} for n in transports.CHAT_PROVIDERS]
        return self._chat.statuses()

    # ---- for the MCP tools: the read cursor, waiting, chat history -------------------------------

    @cached_property
    def _read_locks(self) -> defaultdict[str, asyncio.Lock]:
        # Reading and advancing are two statements; one lock per agent (there is one gateway per
        # deployment) keeps two concurrent check_messages from returning the same message twice.
        return defaultdict(asyncio.Lock)

    @declare(ForItself("agent_id"))
    async def check_messages(self, p: CheckMessagesParams) -> Unread:
        """The agent's unread messages, oldest first; the read cursor moves past them."""
        async with self._read_locks[p.agent_id]:
            messages, has_more = await self._store.unread_messages(p.agent_id, p.limit)
            if messages:
                await self._store.advance_read_cursor(p.agent_id, messages[-1].id)
        return {
            "messages": [event_json(e) for e in messages],
            "agent_id": p.agent_id,
            "has_more": has_more,
            "last_seen_id": messages[-1].id if messages else None,
        }

    @declare(ForItself("agent_id"))
    async def wait_messages(self, p: WaitMessagesParams) -> Waited:
        """Return once the agent has an unread message, or after `timeout` seconds; reads nothing.

        Not consuming is deliberate: a caller that gives up mid-wait loses no message.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + p.timeout
        arrived = self._mailbox.arrivals.event(p.agent_id)
        while True:
            arrived.clear()  # before looking, so a post while we look still wakes the wait
            unread, _ = await self._store.unread_messages(p.agent_id, 1)
            remaining = deadline - loop.time()
            if unread or remaining <= 0:
                return {"agent_id": p.agent_id, "unread": bool(unread)}
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arrived.wait(), min(WAIT_POLL_S, remaining))

    @declare(ForItself(None), check=own_history)
    async def history(self, p: HistoryParams) -> History:
        """A channel's newest messages, both directions, oldest first (from the projection)."""
        events = await self._store.channel_history(p.channel_id, p.limit, p.agent_id)
        return {"channel_id": p.channel_id, "messages": [event_json(e) for e in events]}


def _reply_event(p: ReplyParams, provider: str, chat_id: str | None = None, **fields: Any) -> Event:
    """An agent's reply as it is recorded, to the local inbox or (with `chat_id`) to a chat."""
    payload: dict[str, Any] = {"text": p.message, "provider": provider}
    if chat_id is not None:
        payload["chat_id"] = chat_id
    payload |= {"reply_to": p.reply_to, **({"urgent": True} if p.urgent else {})}
    return Event(
        id=new_event_id(),
        agent_id=p.agent_id or "default",
        channel_id=p.channel_id,
        type="agent_message",
        role="agent",
        direction="out",
        source_agent_id=p.agent_id,
        payload=payload,
        **fields,
    )
