"""Run the gateway: the socket, the methods behind it, and the agents the config registers."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from temporalio.client import Client

from agentcomms.config import Config, host_name
from agentcomms.models import utcnow
from agentcomms.store import Store
from gateway.calls import CallControl
from gateway.mailbox import Mailbox
from gateway.methods import Methods
from gateway.server import SocketServer
from workflows.agent import Registration

log = logging.getLogger(__name__)


class Gateway:
    def __init__(
        self, cfg: Config, client: Client, store: Store, *, host: str | None = None
    ) -> None:
        self.cfg = cfg
        self.host = host or host_name()
        self.started_at: datetime = utcnow()
        self.mailbox = Mailbox(client, store, host=self.host, limits=cfg.mailbox_limits)
        self.methods = Methods(cfg, store, self.mailbox, self.started_at, host=self.host)
        self.calls = CallControl(cfg, client, store)
        self.methods.extend(self.calls.methods())
        self.server = SocketServer(cfg.server.socket(), self.methods.dispatch)

    async def start(self) -> None:
        await self.server.start()
        await self.register_configured_agents()

    async def register_configured_agents(self) -> None:
        for agent_id, agent in self.cfg.agents.items():
            await self.mailbox.register(
                agent_id,
                Registration(
                    target=agent.target,
                    socket=agent.socket,
                    host=agent.host or self.host,
                    interrupt_key=agent.interrupt_key,
                    submit_delay_ms=agent.submit_delay_ms,
                    max_chars=agent.max_chars,
                ),
            )

    async def close(self) -> None:
        await self.server.close()

    async def serve_forever(self) -> None:
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.close()
