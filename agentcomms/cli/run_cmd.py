"""The long-running commands: `up` (everything), `worker`, `gateway`, and `status` (whose report
is :mod:`agentcomms.cli.status`, which the quick path runs without typer).

These are the top of the dependency stack, so they import the gateway and worker packages inside
the command bodies; the rest of the `agentcomms` package never imports them. Temporal, SQLAlchemy
and Alembic are imported there too: every typer command loads this module to find its commands,
and `--help` or `doctor` must not pay for them.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from agentcomms.cli import app
from agentcomms.cli.common import console, fail, print_fields, run_async, styled, user_errors
from agentcomms.config import Config, ensure_home, host_name, load_config

HeadlessOption = Annotated[
    bool, typer.Option("--headless", help="Start the embedded Temporal server without its web UI.")
]


def _load(*, log_file: Path | None = None) -> Config:
    """The config, with logging set up (to `log_file` when ``logging.file`` is not set)."""
    from agentcomms.logs import setup_logging

    with user_errors():  # an unset ${VAR} is one line naming the key, not a traceback
        ensure_home()
        cfg = load_config()
    setup_logging(cfg.logging, default_file=log_file)
    return cfg


@app.command()
def up(headless: HeadlessOption = False) -> None:
    """Run everything on this machine: Temporal, the worker and the gateway.

    Uses the Temporal server at `temporal.address` when one answers; otherwise, for a local
    address, starts `temporal server start-dev` with its database in ~/.agentcomms/temporal.db
    (so messages survive restarts) and the Temporal UI on `temporal.ui_port`.
    Ctrl-C or SIGTERM stops all of it, the embedded server included. It logs to
    `logging.file`, by default ~/.agentcomms/logs/agentcomms.log (`agentcomms service logs`).
    """
    from agentcomms.user_service import default_log_file

    run_async(_up, _load(log_file=default_log_file()), headless)


async def _up(cfg: Config, headless: bool) -> None:
    from agentcomms.runtime import (
        cancel_and_wait,
        keep_dev_server_running,
        stop_signals,
        temporal_and_store,
        until_stopped,
    )
    from agentcomms.state_file import clear_state, write_state
    from agentcomms.store.engine import display_url
    from agentcomms.temporal import DevServer
    from gateway.service import Gateway
    from workers.main import build_workers, run_workers

    async with (
        stop_signals() as stop,
        temporal_and_store(cfg, embed=True, headless=headless) as rt,
    ):
        codec = await _start_codec_server(cfg)
        workers = None
        if rt.dev_server is None:
            await _suggest_rebuild(rt, stop="`agentcomms up`")
        elif await rt.store.holds_nothing():
            # Its own Temporal: before the gateway takes traffic; the worker first, so
            # that each mailbox gives its own account rather than its histories alone.
            workers = asyncio.create_task(run_workers(build_workers(rt.client, cfg, rt.store)))
            await _rebuild_projection(rt)
        gateway = Gateway(cfg, rt.client, rt.store)
        await gateway.start()
        _watch_providers(rt, gateway)
        if workers is None:
            workers = asyncio.create_task(run_workers(build_workers(rt.client, cfg, rt.store)))
        dev = rt.dev_server
        info: dict[str, Any] = {
            "temporal": cfg.temporal.address,
            "temporal_embedded": dev is not None,
            "temporal_ui": dev.ui_url if dev else None,
            "temporal_pid": dev.process.pid if dev else None,
            "socket": str(gateway.server.path),
            "database": display_url(cfg.database.resolved_url()),
        }
        write_state(info)

        def restarted(server: DevServer) -> None:
            info["temporal_pid"] = server.process.pid
            write_state(info)

        supervisor = None
        if dev is not None:
            supervisor = asyncio.create_task(keep_dev_server_running(rt, restarted))
        where = "embedded dev server" if dev else "existing server"
        console.print(styled(("agentcomms is up", "bold green"), " — Ctrl-C stops everything"))
        print_fields(
            [
                ("Temporal", f"{cfg.temporal.address} ({where})"),
                ("Temporal UI", info["temporal_ui"]),
                ("Codec server", codec and f"http://{codec.host}:{codec.port}"),
                ("Console", gateway.console.address_with_token() if gateway.console else None),
                ("Socket", info["socket"]),
                ("Database", info["database"]),
            ]
        )
        _note_missing_tmux()
        try:
            await until_stopped(stop, workers, *([supervisor] if supervisor else []))
        finally:
            # First, so that nothing starts the dev server again while everything stops.
            if supervisor is not None:
                await cancel_and_wait(supervisor)
            _say("stopping…")
            # Each step runs whatever an earlier one raised: a process left behind is worse.
            await _each(
                gateway.close,
                codec.close if codec is not None else None,
                lambda: cancel_and_wait(workers),
            )
            clear_state()


async def _start_codec_server(cfg: Config) -> Any:
    """With encrypted payloads, the codec server the embedded UI was pointed at; else None."""
    if not cfg.temporal.encryption_keys:
        return None
    from agentcomms.codec_server import CodecServer
    from agentcomms.errors import ListenerUnavailable

    server = CodecServer(cfg.temporal)
    try:
        await server.start()
    except ListenerUnavailable as exc:  # the UI shows payloads encrypted; the rest runs
        _note(f"{exc}; going on without it")
        return None
    return server


async def _rebuild_projection(rt: Any) -> None:
    """An empty or missing projection, while Temporal holds this deployment's mailboxes: it was
    lost or deleted, and is made again from Temporal (a new deployment finds nothing to do)."""
    import logging

    from agentcomms.store.engine import display_url
    from gateway.rebuild import rebuild_projection

    rebuilt = await rebuild_projection(rt.client, rt.store, rt.cfg)
    if not rebuilt.agents:
        return
    warning = (
        f"the projection {display_url(rt.cfg.database.resolved_url())} was empty or missing "
        f"while Temporal holds {len(rebuilt.agents)} agents' mailboxes: rebuilt it from "
        f"Temporal ({rebuilt.events} events). What Temporal no longer keeps (older than its "
        "retention, 24 hours of ended runs on the embedded server) and what only the "
        "projection held (messages to your terminal, paired senders) is lost; see "
        "`agentcomms db rebuild --help`."
    )
    logging.getLogger(__name__).warning("%s", warning)
    _note(warning)


async def _suggest_rebuild(rt: Any, *, stop: str) -> None:
    """A projection that looks lost beside a Temporal server this process did not start: said
    (on the terminal and in the log), not done (:func:`gateway.rebuild.rebuild_advice`)."""
    import logging

    from temporalio.service import RPCError

    from agentcomms.store.engine import display_url
    from gateway.rebuild import looks_lost, rebuild_advice

    try:
        lost = await looks_lost(rt.client, rt.store)
    except RPCError as exc:
        # Advice only: a server that lists no workflows (its visibility store down, a role
        # without the right) must not keep the gateway from starting.
        logging.getLogger(__name__).info("could not tell whether the projection is lost: %s", exc)
        return
    if lost:
        database = display_url(rt.cfg.database.resolved_url())
        advice = rebuild_advice(database, rt.cfg.temporal.address, stop=stop)
        logging.getLogger(__name__).warning("%s", advice)
        _note(advice)


def _watch_providers(rt: Any, gateway: Any) -> None:
    """With metrics on, each scrape reads the chat providers' connections."""
    if rt.metrics is not None:
        from agentcomms.metrics import providers_seen

        rt.metrics.before_scrape(lambda: providers_seen(gateway.chat.statuses()))


def _note_missing_tmux() -> None:
    if shutil.which("tmux") is None:
        _note(
            "tmux is not on PATH, so nothing can be typed into panes; messages wait (agents "
            "show as unreachable) until it is installed: apt-get install tmux"
        )


def _note(text: str) -> None:
    console.print(styled(("note:", "yellow"), f" {text}"), soft_wrap=True)


async def _each(*steps: Callable[[], Awaitable[Any]] | None) -> None:
    """Run every step of a stop, each whatever the others raised (logged)."""
    import logging

    for step in steps:
        if step is None:
            continue
        try:
            await step()
        except asyncio.CancelledError:
            pass  # the task stopped, as asked
        except Exception:
            logging.getLogger(__name__).exception("while stopping")


def _say(text: str) -> None:
    """Print while stopping, when the terminal may be gone: `up | tee log` loses its reader to
    the same Ctrl-C, and a closed terminal refuses writes. A write that fails must not cut the
    stop short (rich's console answers a broken pipe with SystemExit), and later ones go
    nowhere."""
    import os
    import sys

    try:
        print(text, flush=True)
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


@app.command()
def worker(
    host_id: Annotated[
        str | None,
        typer.Option(
            "--host-id",
            help="Which host this worker types for (default: the hostname); agents registered "
            "with `agents register … --host ID` are typed into by this worker only.",
        ),
    ] = None,
    shared: Annotated[
        bool,
        typer.Option(
            "--shared/--no-shared",
            help="Also poll the shared queue: phone calls and chat sends. A machine that does not "
            "share the gateway's agentcomms home takes --no-shared: a call's audio is written "
            "where the call runs, and the gateway serves it from its own home.",
        ),
    ] = True,
) -> None:
    """Run only the Temporal worker of this host (for deployments spread over several hosts).

    It polls this host's own queue, where the mailboxes of agents whose panes live on this host
    run, and (unless --no-shared) the shared task queue. Needs a reachable Temporal server
    (`temporal.address`).
    """
    if host_id is not None and not _HOST_ID.fullmatch(host_id):
        fail(f"--host-id {host_id!r}: use 1-64 letters, digits, '.', '_' or '-'")
    run_async(_worker, _load(), host_id, shared)


# A host id names a task queue (agentcomms-host-<id>) and appears in `agents`.
_HOST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


async def _worker(cfg: Config, host_id: str | None = None, shared: bool = True) -> None:
    from agentcomms.runtime import cancel_and_wait, stop_signals, temporal_and_store, until_stopped
    from workers.main import build_workers, run_workers

    async with stop_signals() as stop, temporal_and_store(cfg, embed=False) as rt:
        workers = build_workers(rt.client, cfg, rt.store, host=host_id, shared=shared)
        task = asyncio.create_task(run_workers(workers))
        host = host_id or host_name()
        console.print(
            f"worker for host {host} running against {cfg.temporal.address} — Ctrl-C stops it"
        )
        _note_missing_tmux()
        try:
            await until_stopped(stop, task)
        finally:
            await cancel_and_wait(task)


@app.command()
def gateway() -> None:
    """Run only the gateway: the Unix socket that the CLI and MCP servers talk to.

    One gateway per deployment. Needs a reachable Temporal server and at least one worker
    (`agentcomms worker`) for messages to be typed. On an empty projection beside a Temporal
    server that holds mailboxes it says so and goes on: a lost projection is made again with
    `agentcomms db rebuild` (only `up` with its embedded Temporal rebuilds by itself).
    """
    run_async(_gateway, _load())


async def _gateway(cfg: Config) -> None:
    from agentcomms.runtime import stop_signals, temporal_and_store, until_stopped
    from gateway.service import Gateway

    async with stop_signals() as stop, temporal_and_store(cfg, embed=False) as rt:
        # Not rebuilt here: beside a Temporal server it did not start, as `up` is beside one.
        await _suggest_rebuild(rt, stop="the gateway")
        gw = Gateway(cfg, rt.client, rt.store)
        await gw.start()
        _watch_providers(rt, gw)
        console.print(f"gateway listening on {gw.server.path} — Ctrl-C stops it")
        if gw.console is not None:
            print_fields([("Console", gw.console.address_with_token())])
        try:
            await until_stopped(stop)
        finally:
            await gw.close()


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Say what is running: the gateway, Temporal (and its UI), workers, agents. Exits 1 when the
    gateway is down."""
    from agentcomms.cli import status as status_report

    status_report.show(as_json)
