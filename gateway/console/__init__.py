"""The local web console: every agent's live state, its pending approvals and its story, in a
browser on this machine, served by the gateway (Starlette on uvicorn, loopback only).

:mod:`access` (the token, the sessions it opens, the forms' field), :mod:`peers` (no process
in an agent's pane, nor another Unix user, whatever it carries), :mod:`feed` (what changed, for every
open page at once), :mod:`turns` (a process agent's turn as it streams), :mod:`app` (the
routes), :mod:`pages` (HTML from ``templates/``); the
script and styles it ships are in ``static/`` (plain JavaScript, no build step).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from agentcomms.config import ConsoleConfig, TemporalConfig
from agentcomms.store import Store
from agentcomms.temporal import poll_silence_s
from agentcomms.voice.audio import AudioStore
from gateway.agents.hosts import HostWatch
from gateway.agents.starting import NewAgents
from gateway.approvals.methods import ApprovalMethods
from gateway.console.access import Access, console_token
from gateway.console.app import ConsoleApp
from gateway.console.peers import OnlyTheHuman
from gateway.console.turns import LiveTurns
from gateway.http import WebhookServer
from gateway.socket.panes import AgentPanes
from gateway.socket.table import MethodTable
from workflows.mailbox.client import Mailbox

__all__ = ["Console", "console_token"]


class Console:
    def __init__(
        self,
        cfg: ConsoleConfig,
        store: Store,
        methods: MethodTable,
        approvals: ApprovalMethods,
        mailbox: Mailbox,
        audio: AudioStore,
        *,
        temporal: TemporalConfig,
        turns: LiveTurns,
        deployment: str,
        panes: AgentPanes,
        new_agents: NewAgents,
        token: str | None = None,
        published: Sequence[BaseRoute] = (),
    ) -> None:
        # `deployment` names this gateway (its socket): a session it issued opens no other.
        self.access = Access(token or console_token(), deployment=deployment)
        # What the console shows live: the approvals and the process agents' turns the gateway
        # hears (through the hooks' path) as they happen.
        self.turns = turns
        self.feed = turns.feed
        hosts = HostWatch(mailbox.client, store, poll_silence_s(temporal))
        app = ConsoleApp(
            self.access,
            self.feed,
            store,
            methods,
            approvals,
            mailbox,
            audio,
            hosts,
            temporal.task_queue,
            self.turns,
            new_agents,
        )
        self.server = WebhookServer(
            cfg.host,
            cfg.port,
            # `published`: what only a published console serves (an email's one-time links).
            [*published, *app.routes()],
            public_url=cfg.public_url,
            what="the console",
            settings="console.port (or console.enabled: false)",
            # Whatever cookie or token it carries, a process in an agent's pane is not the human.
            middleware=[Middleware(OnlyTheHuman, panes=panes)],
        )

    @property
    def address(self) -> str:
        host = f"[{self.server.host}]" if ":" in self.server.host else self.server.host
        return f"http://{host}:{self.server.port}/"

    def address_with_token(self) -> str:
        """What a person opens; printed to their terminal, never logged."""
        return f"{self.address}?t={self.access.token}"

    async def start(self) -> None:
        await self.server.start()
        self.access.port = self.server.port

    async def close(self) -> None:
        await self.feed.close()
        await self.server.close()
