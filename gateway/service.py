"""Run the gateway: the socket, the methods behind it, and the agents the config registers."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from temporalio.client import Client

from agentcomms.bridge.screen_state import ScreenCheck
from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.config import Config, host_name, load_config
from agentcomms.config.agents import servers_missing
from agentcomms.errors import ListenerUnavailable
from agentcomms.models import Registration, utcnow
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from agentcomms.voice.audio import AudioStore
from gateway.agents.dialogs import DialogWatch
from gateway.agents.hook_http import HookReports
from gateway.agents.hooks import AgentHookMethods, PaneAgents
from gateway.agents.mirror import ReplyMirror
from gateway.agents.notices import HumanNotices
from gateway.agents.peek import AgentPeek
from gateway.agents.processes import ProcessAgentMethods, start_configured
from gateway.agents.starting import NewAgents
from gateway.agents.turns import TurnLog
from gateway.approvals.chat_answers import ChatAnswers
from gateway.approvals.chat_posts import ApprovalChats
from gateway.approvals.email_links import EmailLinks, link_tokens
from gateway.approvals.methods import ApprovalMethods
from gateway.approvals.own_dialogs import OwnDialogs
from gateway.approvals.phone import ApprovalCalls
from gateway.approvals.push import PushAnswers, tokens_for
from gateway.chat.admission import Admission
from gateway.chat.commands import ChatCommands
from gateway.chat.inbox import ChatInbox, ChatTransports
from gateway.chat.senders import SenderMethods
from gateway.console.feed import Feed
from gateway.console.turns import LiveTurns
from gateway.http import WebhookServer
from gateway.messages.methods import Methods
from gateway.messages.notify import PushNotify
from gateway.messages.urgent import UrgentMessages
from gateway.phone.calls import CallControl
from gateway.phone.lines import LineReader
from gateway.phone.menu import LocalDial, PhoneMenu
from gateway.rebuild import record_configured_channels
from gateway.reload import ConfigReload
from gateway.socket.confine import Confinement
from gateway.socket.panes import AgentPanes
from gateway.socket.server import SocketServer
from gateway.socket.table import MethodTable
from workflows.approval.client import Approvals
from workflows.mailbox.client import Mailbox
from workflows.outbox.client import Outbox

if TYPE_CHECKING:
    from agentcomms.voice.callsystem.twilio import MediaSigner
    from gateway.console import Console
    from gateway.phone.calls_in import InboundCalls

log = logging.getLogger(__name__)
# How often the gateway deletes audio past voice.audio_keep_days.
PRUNE_EVERY_S = 6 * 3600


# The rooms whose declared methods the socket serves, in the order the table is built.
SOCKET_ROOMS: tuple[type, ...] = (
    Methods,
    CallControl,
    SenderMethods,
    AgentHookMethods,
    ProcessAgentMethods,
    AgentPeek,
    ApprovalMethods,
    LocalDial,
    ConfigReload,
)


class Gateway:
    def __init__(
        self,
        cfg: Config,
        client: Client,
        store: Store,
        *,
        host: str | None = None,
        load: Callable[[], Config] = load_config,
    ) -> None:
        self.cfg = cfg
        self.host = host or host_name()
        self.started_at: datetime = utcnow()
        self.store = store
        self.key = DeploymentKey.load(cfg.security)
        # An urgent message's ladder stops at the human's next message.
        urgent = UrgentMessages(cfg, client, self.key, store)
        # The panes of the agents on this host, each known from the moment its registration
        # is accepted, before the projection shows it; and the processes of its process agents,
        # told by their worker: what descends from one is that agent's, as a process in a pane is.
        self.agent_panes = AgentPanes(store, self.host)
        self.mailbox = Mailbox(
            client,
            store,
            task_queue=cfg.temporal.task_queue,
            key=self.key,
            limits=cfg.mailbox_limits,
            accepted_by=f"the gateway on {self.host} (pid {os.getpid()})",
            observers=[urgent.heard],
            registering=[self.agent_panes.accepted],
        )
        self.outbox = Outbox(client, cfg.temporal.task_queue, key=self.key)
        panes = PaneAgents(store, self.host)
        push_tokens = tokens_for(self.key)
        links = link_tokens(self.key)
        self.approval_chats = ApprovalChats(cfg, store, push_tokens, links)
        # One-way notifications to the human's ntfy topic: turns ended, agents gone, asks.
        self.notify = PushNotify(cfg)
        # The console's live view: approvals and process agents' turns as they happen (heard
        # whether it is served or not; only a served page listens).
        feed = Feed(store)
        self._live_turns = LiveTurns(feed)
        self.approvals = approvals = ApprovalMethods(
            cfg,
            client,
            self.key,
            panes,
            self.approval_chats,
            store,
            observers=[self.notify.approval, feed.approval],
        )
        # A notification's buttons come back here, to the one decide path; and an email's
        # one-time links, through the published console.
        self.push_answers = PushAnswers(cfg, push_tokens, store, approvals.view, approvals.decide)
        self.email_links = EmailLinks(cfg, links, store, approvals.view, approvals.decide)
        # A tool that ran answers its approval; a turn's reply goes back to its chat.
        mirror = ReplyMirror(cfg, store, self.outbox)
        processes = ProcessAgentMethods(
            self.mailbox, store, self.host, running=self.agent_panes.processes
        )
        # A look at an agent (a chat's /peek, `agents peek`): its last reply from the hooks.
        peek = AgentPeek(store, self.host)
        self.hooks = hooks = AgentHookMethods(
            self.mailbox,
            self.host,
            panes,
            observers=[
                mirror.agent_did,
                approvals.agent_did,
                self.notify.agent_did,
                peek.agent_did,
                # A process agent's turns, begun and ended, in its events.
                TurnLog(store).agent_did,
                self._live_turns.agent_did,
            ],
        )
        # A new agent by id, folder and kind: a chat's /new, the console's New agent form.
        self.new_agents = NewAgents(cfg, store, processes)
        commands = ChatCommands(
            cfg, store, self.mailbox, processes, peek, hooks.register, self.new_agents
        )
        answers = ChatAnswers(
            cfg,
            store,
            Approvals(client, cfg.temporal.task_queue),
            approvals.decide,
            self.approval_chats,
        )
        self.inbox = ChatInbox(
            cfg,
            store,
            self.mailbox,
            self.outbox,
            on_button=answers.button,
            on_reply=answers.reply,
            host=self.host,
            commands=commands,
        )
        self.chat = ChatTransports(cfg, self.inbox)
        # A sender admitted by `pair` is told so, and what they wrote meanwhile goes on.
        admission = Admission(cfg, store, self.mailbox, self.outbox, self.inbox)
        # What the panes show, looked at once for `agents`, `status` and the dialogs' watch.
        tmux = TmuxAdapter()
        screen = ScreenCheck(tmux, self.host)
        # A dialog an agent shows without a hook is told; Claude Code's own, in auto mode, is
        # an approval where it is read exactly.
        notices = HumanNotices(cfg, store)
        self.own_dialogs = OwnDialogs(cfg, approvals, self.key, tmux, notices, self.mailbox.post)
        self._dialogs = DialogWatch(store, notices, screen, tmux, self.own_dialogs)
        self.methods = Methods(
            cfg,
            store,
            self.mailbox,
            self.started_at,
            host=self.host,
            outbox=self.outbox,
            chat=self.chat,
            on_urgent=urgent.sent,
            screen=screen,
            console=lambda: self.console.address if self.console is not None else None,
            own_dialog=self.own_dialogs.asked,
        )
        # A request's call, once answered, is driven by its approval: it hears the line.
        lines = LineReader(client)
        self.approval_calls = ApprovalCalls(cfg, client, self.key, lines.current, approvals)
        self.calls = CallControl(
            cfg, client, store, self.key, lines, line_observers=[self.approval_calls.line_event]
        )
        # What a human who calls in hears: through Twilio, or the local phone's --dial.
        self.phone_menu = PhoneMenu(cfg, store, approvals, post=self.mailbox.post)
        # Each request admitted as its method's declaration says: an agent's gets only what is
        # its own, and no process in an agent's pane decides for the human.
        rooms = (
            self.methods,
            self.calls,
            SenderMethods(cfg, store, admitted=admission.admitted),
            hooks,
            processes,
            peek,
            approvals,
            LocalDial(self.phone_menu),
            # `config reload` reads the file as the process first did (AGENTCOMMS_CONFIG, home).
            ConfigReload(
                cfg, load, self.register_configured_agents, self.record_configured_channels
            ),
        )
        assert tuple(map(type, rooms)) == SOCKET_ROOMS  # the protocol's reference reads these
        self.socket_methods = MethodTable(
            Confinement(cfg, store, self.agent_panes), cfg.temporal.address, *rooms
        )
        self.server = SocketServer(cfg.server.socket(), self.socket_methods.call)
        # The hooks' own door, for agents that run as their own Unix user (the socket is ours).
        hooks_path = cfg.server.hooks_socket_path
        self.hooks_server = (
            SocketServer(hooks_path.expanduser(), self.socket_methods.call_hook, mode=0o666)
            if hooks_path is not None
            else None
        )
        self.http: WebhookServer | None = None
        self.hook_reports: HookReports | None = None
        self.console: Console | None = None
        self._pruning: asyncio.Task[None] | None = None
        self._watching: asyncio.Task[None] | None = None
        self._watching_dialogs: asyncio.Task[None] | None = None
        self.inbound_calls: InboundCalls | None = None

    async def start(self) -> None:
        await self.server.start()
        if self.hooks_server is not None:
            await self.hooks_server.start()
        if self.cfg.server.hook_port is not None:
            from agentcomms.hook_token import hook_token

            reports = HookReports(self.hooks, hook_token(), self.cfg.server.hook_port)
            if await _listening(reports.start, "hooks report through `agentcomms hook` only"):
                self.hook_reports = reports
        await self.register_configured_agents()
        await self.record_configured_channels()
        await self.chat.start()
        routes = self.chat.routes() + self._call_routes() + self._push_routes()
        if routes:  # only when a provider receives by webhook
            server = self.cfg.server
            http = WebhookServer(
                server.http_host,
                server.http_port,
                routes,
                public_url=server.public_url,
                names=server.allowed_hosts,
            )
            if await _listening(http.start, "providers' webhooks do not arrive"):
                self.http = http
        if self.inbound_calls is not None:  # messages whose recordings it was still fetching
            await self.inbound_calls.resume()
        # Looking at each open approval is a query, which only a polling worker answers; `up`
        # starts its worker after the gateway, and a restart waited on the last worker's queue
        # for about 30 s. Nothing at start waits on it: the watch catches up once one polls.
        self._watching = asyncio.create_task(self._watch_open(), name="open approvals' watch")
        if self.cfg.console.enabled:
            await self.start_console()
        self._pruning = asyncio.create_task(self._prune_audio(), name="audio pruning")
        self._watching_dialogs = asyncio.create_task(self._dialogs.run(), name="dialogs' watch")

    async def _watch_open(self) -> None:
        try:
            await self.approvals.watch_open()
        except Exception as exc:  # Temporal away: a hook that comes back still closes its own
            log.warning("could not list the approvals still open to watch their deadlines: %s", exc)

    async def start_console(self) -> None:
        """The local web console, on loopback (`console.port`)."""
        from gateway.console import Console

        audio = AudioStore(self.cfg.voice.audio_root())
        console = Console(
            self.cfg.console,
            self.store,
            self.socket_methods,
            self.approvals,
            self.mailbox,
            audio,
            temporal=self.cfg.temporal,
            turns=self._live_turns,
            deployment=str(self.cfg.server.socket()),
            panes=self.agent_panes,
            new_agents=self.new_agents,
            published=self.email_links.routes() if self.cfg.console.public_url else [],
        )
        if not await _listening(console.start, "the console is not served"):
            return
        self.console = console

    def _call_routes(self) -> list[Any]:
        """Twilio's voice webhooks and our signed audio, when calls go through Twilio."""
        from agentcomms.voice.callsystem import twilio_configured

        if not twilio_configured(self.cfg):
            return []
        from agentcomms.voice.callsystem.twilio import TwilioVoiceReceiver

        signer = self.media_signer()
        routes = TwilioVoiceReceiver(self.cfg, self.calls, signer=signer).routes()
        if self.cfg.voice.inbound.allowed_callers:
            from gateway.phone.calls_in import InboundCalls

            self.inbound_calls = InboundCalls(self.cfg, self.phone_menu, signer)
            routes += self.inbound_calls.routes()
        return routes

    def _push_routes(self) -> list[Any]:
        """Where a notification's buttons post, when they have a published URL to reach."""
        ntfy = self.cfg.chat.ntfy
        if not (ntfy.enabled and self.cfg.server.public_url):
            return []
        return self.push_answers.routes()

    def media_signer(self) -> MediaSigner:
        """Signs the audio URLs Twilio fetches; its key comes from the deployment's, so a URL a
        call was given still works after the gateway restarts (or on another gateway)."""
        from agentcomms.voice.callsystem.twilio import MediaSigner

        return MediaSigner(self.key.derive("call audio URLs"))

    async def record_configured_channels(self) -> None:
        await record_configured_channels(self.cfg, self.store)

    async def register_configured_agents(self, only: list[str] | None = None) -> None:
        """The agents of the config registered (``only`` these, when given)."""
        chosen = {i: a for i, a in self.cfg.agents.items() if only is None or i in only}
        for problem in servers_missing(chosen, self.host):
            log.warning("%s", problem)  # registered all the same: its messages wait for it
        for agent_id, agent in self.cfg.agents.items():
            if only is not None and agent_id not in only:
                continue
            if agent.acp is not None:
                await start_configured(self.mailbox, agent_id, agent, self.host)
                continue
            assert agent.target is not None  # the config's own check: a pane or a process
            await self.mailbox.register(
                agent_id,
                Registration(
                    target=agent.target,
                    socket=agent.socket,
                    host=agent.host or self.host,
                    interrupt_key=agent.interrupt_key,
                    submit_delay_ms=agent.submit_delay_ms,
                    max_chars=agent.max_chars,
                    deliver=agent.deliver,
                ),
            )

    async def _prune_audio(self) -> None:
        """Calls' sounds and transcripts, and voice notes, are kept `voice.audio_keep_days`:
        recordings of people's voices do not pile up for ever in the home."""
        audio = AudioStore(self.cfg.voice.audio_root())
        keep_s = self.cfg.voice.audio_keep_days * 86_400
        while True:
            try:
                gone = await asyncio.to_thread(audio.prune, time.time() - keep_s)
            except OSError as exc:
                log.warning("cannot prune the audio directory %s: %s", audio.root, exc)
            else:
                if gone:
                    log.info("deleted %d calls' and voice notes' audio past their days", gone)
            await asyncio.sleep(PRUNE_EVERY_S)

    async def close(self) -> None:
        if self._pruning is not None:
            self._pruning.cancel()
        if self._watching_dialogs is not None:
            self._watching_dialogs.cancel()
            await asyncio.gather(self._watching_dialogs, return_exceptions=True)
        await self.own_dialogs.close()
        if self._watching is not None:
            self._watching.cancel()
            await asyncio.gather(self._watching, return_exceptions=True)
        if self.console is not None:
            await self.console.close()
        if self.http is not None:
            await self.http.close()
        if self.hook_reports is not None:
            await self.hook_reports.close()
        if self.inbound_calls is not None:
            await self.inbound_calls.close()
        await self.chat.close()
        await self.server.close()
        if self.hooks_server is not None:
            await self.hooks_server.close()
        await self.approvals.close()
        await self.approval_chats.close()
        await self.approval_calls.close()
        await self.notify.drain()

    async def serve_forever(self) -> None:
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.close()


async def _listening(start: Callable[[], Awaitable[None]], without: str) -> bool:
    """Start a listener; one that cannot bind its port (another deployment, another program)
    is one line naming the setting to change, and the gateway goes on without it."""
    try:
        await start()
    except ListenerUnavailable as exc:
        log.warning("%s; going on without it: %s", exc, without)
        return False
    return True
