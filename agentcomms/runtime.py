"""What `agentcomms up`, `worker` and `gateway` share: Temporal (embedded or not), the store,
orderly shutdown on Ctrl-C or SIGTERM, and a state file that `agentcomms status` reads."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from temporalio.client import Client

from agentcomms.address import is_local, server_answers
from agentcomms.config import Config
from agentcomms.errors import ListenerUnavailable, StoppedDuringStartup, TemporalUnavailable
from agentcomms.metrics import MetricsServer, free_loopback_address, temporal_runtime
from agentcomms.store import Store
from agentcomms.temporal import (
    DevServer,
    connect,
    end_leftover_dev_servers,
    ensure_search_attributes,
)

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    cfg: Config
    client: Client
    store: Store
    dev_server: DevServer | None = None
    metrics: MetricsServer | None = None


@asynccontextmanager
async def temporal_and_store(
    cfg: Config, *, embed: bool, headless: bool = False
) -> AsyncIterator[Runtime]:
    """Connect to Temporal (starting the embedded dev server when allowed) and open the store."""
    dev: DevServer | None = None
    address = cfg.temporal.address
    if embed and cfg.temporal.embedded:
        await asyncio.to_thread(end_leftover_dev_servers, cfg.temporal)
    if not server_answers(address):
        if embed and cfg.temporal.uses_tls():
            # The embedded dev server has no TLS: a TLS address names a cluster of its own.
            raise TemporalUnavailable(
                f"No Temporal server at {address}. With TLS configured (temporal.tls, "
                "temporal.api_key or temporal.tls_*) agentcomms does not start its embedded dev "
                "server, which has no TLS: start that cluster, or remove the TLS keys to run "
                "the dev server."
            )
        if not (embed and cfg.temporal.embedded and is_local(address)):
            raise TemporalUnavailable(
                f"No Temporal server at {address}. Start one with `agentcomms up` (which embeds a "
                "dev server) or set temporal.address to a running server."
            )
        dev = await _start_dev_server(cfg, headless)
    rt: Runtime | None = None
    metrics: MetricsServer | None = None
    try:
        sdk_runtime = None
        if cfg.metrics.address:
            # The SDK serves its own metrics on a loopback port; ours appends them.
            sdk_address = free_loopback_address()
            sdk_runtime = temporal_runtime(sdk_address)
            metrics = MetricsServer(
                cfg.metrics.address, sdk_address=sdk_address, names=cfg.server.allowed_hosts
            )
            try:
                metrics.start()
            except ListenerUnavailable as exc:
                # Another deployment's port: the rest runs, as it does with metrics off.
                log.warning("%s; going on without metrics", exc)
                metrics = None
        client = await connect(cfg.temporal, patience_s=5.0, runtime=sdk_runtime)
        if dev is None:
            await ensure_search_attributes(client, cfg.temporal)
        store = await Store.open(cfg.database.resolved_url())
        try:
            rt = Runtime(cfg=cfg, client=client, store=store, dev_server=dev, metrics=metrics)
            yield rt
        finally:
            await store.close()
    finally:
        if metrics is not None:
            await metrics.close()
        # The supervisor may have replaced the server we started.
        running = rt.dev_server if rt is not None else dev
        if running is not None:
            await asyncio.to_thread(running.stop)


# A dev server that dies this soon after (re)starting is failing, not crashing once.
DEV_SERVER_MIN_UPTIME_S = 30.0
DEV_SERVER_MAX_QUICK_DEATHS = 3


async def keep_dev_server_running(
    rt: Runtime, on_restart: Callable[[DevServer], None] = lambda _: None
) -> None:
    """Restart the embedded Temporal server when it dies under `up` (killed, out of memory).

    Its database file keeps every mailbox, and the worker and clients reconnect by themselves,
    so a restart loses nothing. A server that keeps dying right after starting is given up on:
    this raises, and `up` stops with the reason instead of looping.
    """
    quick_deaths = 0
    while (dev := rt.dev_server) is not None:
        started = time.monotonic()
        code = await asyncio.to_thread(dev.process.wait)
        quick_deaths = (
            quick_deaths + 1 if time.monotonic() - started < DEV_SERVER_MIN_UPTIME_S else 0
        )
        if quick_deaths >= DEV_SERVER_MAX_QUICK_DEATHS:
            raise TemporalUnavailable(
                f"The embedded Temporal server exited (code {code}) {quick_deaths} times in a row "
                f"soon after starting; see {dev.log_path}."
            )
        log.warning(
            "the embedded Temporal server exited (code %s); restarting it (log: %s)",
            code,
            dev.log_path,
        )
        # Stopped while it boots: the server it was booting is stopped too, never left behind.
        rt.dev_server = await _start_dev_server(rt.cfg, headless=dev.ui_url is None)
        on_restart(rt.dev_server)


async def _start_dev_server(cfg: Config, headless: bool) -> DevServer:
    booting = asyncio.ensure_future(
        asyncio.to_thread(DevServer.start, cfg.temporal, headless=headless)
    )
    try:
        return await asyncio.shield(booting)
    except asyncio.CancelledError:
        # Stopped while it boots: the thread cannot be interrupted, so let it finish, then stop
        # the server it started rather than leave it behind.
        with contextlib.suppress(Exception):
            await asyncio.to_thread((await booting).stop)
        raise


class StopEvent(asyncio.Event):
    """Set by Ctrl-C or SIGTERM.

    Until something waits on it, that is during start-up, a signal also cancels the task that is
    starting: a dev server slow to boot or an address that never answers must not outlive the
    user's Ctrl-C.
    """

    def __init__(self, starting: asyncio.Task[Any] | None) -> None:
        super().__init__()
        self._starting = starting
        self.cancelled_startup = False

    def signal(self) -> None:
        if self.is_set():
            return  # a second Ctrl-C: the stop is under way
        self.set()
        if self._starting is not None:
            self._starting.cancel()
            self._starting = None
            self.cancelled_startup = True

    async def wait(self) -> Literal[True]:
        self._starting = None  # started: from now on the waiter stops things in order
        return await super().wait()


# Without a handler SIGHUP (a closed terminal) would end the process at once, skipping the stop
# that ends the embedded Temporal server.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@asynccontextmanager
async def stop_signals() -> AsyncIterator[asyncio.Event]:
    """An event set by Ctrl-C, SIGTERM or SIGHUP (the terminal closed), installed first so a
    signal during start-up is not lost. Once set, a second Ctrl-C changes nothing: the stop
    already under way finishes in order."""
    stop = StopEvent(asyncio.current_task())
    loop = asyncio.get_running_loop()
    # `nohup agentcomms up` asked to outlive its terminal: a SIGHUP ignored stays ignored.
    caught = [s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]
    for sig in caught:
        loop.add_signal_handler(sig, stop.signal)
    try:
        yield stop
    except asyncio.CancelledError:
        if not stop.cancelled_startup:
            raise
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        raise StoppedDuringStartup(
            "stopped by a signal before start-up finished; nothing was left running"
        ) from None
    finally:
        for sig in caught:
            loop.remove_signal_handler(sig)


async def until_stopped(stop: asyncio.Event, *tasks: asyncio.Task[Any]) -> None:
    """Wait for the stop event, or for a task to end (a crashed worker is raised, not hidden)."""
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({waiter, *tasks}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    for task in tasks:
        if task in done:
            task.result()


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
