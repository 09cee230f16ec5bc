"""A whole agentcomms stack in the test process: worker, gateway socket, store — real parts.

Each stack has its own host name (so its own host task queue), its own shared task queue, its own
SQLite file and socket, on the session's Temporal dev server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from agentcomms.client import GatewayClient
from agentcomms.config import (
    AcpConfig,
    Config,
    ConsoleConfig,
    DatabaseConfig,
    MailboxConfig,
    SecurityConfig,
    ServerConfig,
    TemporalConfig,
    VoiceConfig,
)
from agentcomms.models import Agent, Event
from agentcomms.store import Store
from agentcomms.workflow_ids import CALL_WORKFLOW, MAILBOX_WORKFLOW, call_workflow_id, mailbox_id
from gateway.service import Gateway
from gateway.socket.caller import Peer
from tests.support.tmux import Tmux, pane_command, recorder
from tests.support.waiting import eventually
from workers.main import build_workers

STACK_KEY = "test-deployment-key-of-the-stacks-in-this-run"


def answered_by_this_process() -> str:
    """Who the records say answered when this process answers through the socket: its user,
    and its terminal where it has one (read from the connection, never from the request)."""
    return Peer(os.getpid(), os.getuid(), os.getgid()).said()


@dataclass
class Stack:
    """A running stack: its configuration, Temporal client, projection, gateway, host, and a
    client of its gateway socket."""

    cfg: Config
    client: Client
    store: Store
    gateway: Gateway
    host: str
    rpc: GatewayClient

    async def call(self, method: str, **params: Any) -> Any:
        """A request on the gateway socket, as the CLI and MCP servers make them; its result."""
        return await self.rpc.call(method, **params)

    async def restart_gateway(self, *, down_s: float = 0) -> None:
        """The gateway stopped and, `down_s` later, started afresh, as a new process: all it
        held in memory is gone; Temporal, the projection and the worker stay. The socket client
        connects again."""
        await self.gateway.close()
        await self.rpc.close()
        await asyncio.sleep(down_s)
        self.gateway = Gateway(self.cfg, self.client, self.store, host=self.host)
        await self.gateway.start()
        self.rpc = GatewayClient(self.cfg.server.socket())
        await self.rpc.connect()

    def agent_id(self, name: str = "agent") -> str:
        """A workflow id unique to this test (the dev server is shared by the session)."""
        return f"{name}-{uuid.uuid4().hex[:8]}"


def stack_config(
    tmp_path: Path,
    client: Client,
    *,
    socket_path: Path | None = None,
    mailbox: MailboxConfig | None = None,
    voice: VoiceConfig | None = None,
) -> Config:
    return Config(
        mailbox=mailbox or MailboxConfig(),
        # Calls keep their audio beside the test's database, not in a shared home.
        voice=voice or VoiceConfig(audio_dir=tmp_path / "audio"),
        # Process agents' sessions beside it too, not in the home of whoever runs the tests.
        acp=AcpConfig(state_dir=tmp_path / "acp"),
        # Hooks report through the socket; the HTTP door's own tests open it (its token is
        # kept in the agentcomms home, which a stack does not own).
        server=ServerConfig(socket_path=socket_path or tmp_path / "daemon.sock", hook_port=None),
        temporal=TemporalConfig(
            address=client.service_client.config.target_host,
            task_queue=f"tq-{uuid.uuid4()}",
        ),
        database=DatabaseConfig(url=f"sqlite+aiosqlite:///{tmp_path / 'agentcomms.db'}"),
        # A stack's own key: none is generated into the home of whoever runs the tests.
        security=SecurityConfig(deployment_key=SecretStr(STACK_KEY)),
        # Only the console's own tests serve it (on a port the system picks).
        console=ConsoleConfig(enabled=False, port=0),
    )


@asynccontextmanager
async def running_stack(
    client: Client,
    tmp_path: Path,
    *,
    with_worker: bool = True,
    socket_path: Path | None = None,
    host: str | None = None,
    mailbox: MailboxConfig | None = None,
    voice: VoiceConfig | None = None,
    configure: Callable[[Config], Config] | None = None,
    load: Callable[[], Config] | None = None,
) -> AsyncIterator[Stack]:
    """``configure`` adjusts the stack's configuration (chat providers, channels) before start;
    ``load`` is what `config reload` reads (the file, without it)."""
    cfg = stack_config(tmp_path, client, socket_path=socket_path, mailbox=mailbox, voice=voice)
    if configure is not None:
        cfg = configure(cfg)
    host = host or f"test-{uuid.uuid4().hex[:8]}"
    async with AsyncExitStack() as stack:
        store = await Store.open(cfg.database.resolved_url())
        stack.push_async_callback(_bounded, "the store's close", store.close)
        if with_worker:
            for worker in build_workers(client, cfg, store, host=host):
                await worker.__aenter__()
                stack.push_async_callback(
                    _bounded,
                    f"the worker of {worker.task_queue}'s shutdown",
                    functools.partial(worker.__aexit__, None, None, None),
                )
        gateway = Gateway(cfg, client, store, host=host, **({"load": load} if load else {}))
        await gateway.start()
        rpc = GatewayClient(cfg.server.socket())
        running = Stack(cfg=cfg, client=client, store=store, gateway=gateway, host=host, rpc=rpc)
        # The gateway running at the end (a test may have restarted it), and the socket client.
        stack.push_async_callback(_bounded, "the gateway's close", lambda: running.gateway.close())
        await rpc.connect()
        stack.push_async_callback(
            _bounded, "the socket client's close", lambda: running.rpc.close()
        )
        yield running


# A stack's parts close in milliseconds. Rarely (about one full run in several), a teardown never
# ended and the per-test timeout ended the whole run: a worker's shutdown waiting for a local
# activity the SDK's core stopped tracking (temporalio PR #1837 describes it) is the suspect.
# Past this, what is still pending is printed, for the next person to read, and the test goes on.
TEARDOWN_S = 45


async def _bounded(what: str, close: Callable[[], Awaitable[object]]) -> None:
    try:
        async with asyncio.timeout(TEARDOWN_S):
            await close()
    except TimeoutError:
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        print(
            f"\n{what} did not end in {TEARDOWN_S} s; {len(pending)} tasks pending:",
            file=sys.stderr,
        )
        for task in pending:
            task.print_stack(limit=8, file=sys.stderr)


@pytest.fixture
async def stack(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Stack]:
    """A whole stack with its worker, on the session's dev server, as most tests use it."""
    async with running_stack(temporal_env.client, tmp_path) as s:
        yield s


async def register(stack: Stack, agent: str, tmux: Tmux, target: str, **extra: Any) -> None:
    """`agent` registered on the pane `target` of the test's tmux server."""
    await stack.call("register", agent_id=agent, target=target, socket=tmux.socket, **extra)


async def recording_pane(
    stack: Stack,
    agent: str,
    tmux: Tmux,
    tmp_path: Path,
    *,
    folder: Path | None = None,
    **extra: Any,
) -> Path:
    """A recorder pane registered as `agent`'s, typed into without a pause before Enter (and
    with `extra` registration fields), working in `folder` if given: the file its bytes land
    in."""
    target, out = recorder(tmux, tmp_path, "rec", folder=folder)
    # Text typed before `stty raw` runs would be cooked (its CR read as LF), and under
    # load a message typed at once can arrive so. Wait for cat first.
    await eventually(lambda: pane_command(tmux, target) == "cat", timeout=5)
    await register(stack, agent, tmux, target, submit_delay_ms=0, **extra)
    return out


async def register_recorder(
    stack: Stack, tmux: Tmux, tmp_path: Path, agent: str, *, folder: Path | None = None
) -> Path:
    """A recorder pane registered as `agent`'s, the agent online, working in `folder` if given;
    returns the file its bytes land in."""
    target, out = recorder(tmux, tmp_path, agent, folder=folder)
    # Text typed before `stty raw` runs would be cooked (CR read as LF): wait for cat first.
    await eventually(lambda: pane_command(tmux, target) == "cat", timeout=5)
    await register(stack, agent, tmux, target, submit_delay_ms=0)
    # send_agent_message waits for the pane only for a peer the projection shows online.
    await eventually(lambda: status_is(stack, agent, "online"), timeout=10)
    return out


async def delivered(stack: Stack, event_id: str) -> Event | None:
    """The event, once the projection shows it delivered (for ``eventually``)."""
    event = await stack.store.get_event(event_id)
    return event if event is not None and event.status == "delivered" else None


async def in_state(stack: Stack, agent: str, state: str) -> Agent | None:
    """The agent's row once the projection shows it `state` (for ``eventually``)."""
    row = await stack.store.get_agent(agent)
    return row if row is not None and row.state == state else None


async def open_approvals(stack: Stack, agent: str) -> list[dict[str, Any]]:
    """The agent's open approvals, as `agentcomms approvals` lists them."""
    listed = await stack.call("approvals")
    return [a for a in listed["approvals"] if a["agent_id"] == agent]


async def status_is(stack: Stack, agent: str, status: str) -> bool:
    row = await stack.store.get_agent(agent)
    return row is not None and row.status == status


def in_mailbox_of(agent_id: str, **info: object) -> ActivityEnvironment:
    """An activity environment as the agent's mailbox runs its pane activities: locally."""
    return _local_activity(mailbox_id(agent_id), MAILBOX_WORKFLOW, info)


def in_call(call_id: str, **info: object) -> ActivityEnvironment:
    """An activity environment as a call's own workflow runs its activities: locally."""
    return _local_activity(call_workflow_id(call_id), CALL_WORKFLOW, info)


def _local_activity(
    workflow_id: str, workflow_type: str, info: dict[str, object]
) -> ActivityEnvironment:
    env = ActivityEnvironment()
    fields: dict[str, Any] = {
        "is_local": True,
        "workflow_id": workflow_id,
        "workflow_type": workflow_type,
    }
    env.info = dataclasses.replace(env.info, **(fields | info))
    return env
