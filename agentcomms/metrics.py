"""Prometheus metrics: ours, and the Temporal SDK's own, on one endpoint (`metrics.address`).

Off unless `metrics.address` is set. The SDK serves its metrics from its Rust runtime on a port of
its own (loopback, chosen here); our endpoint serves ours and appends the SDK's on each scrape,
so one process (`up` runs worker and gateway in one) has one endpoint to scrape.

Counters are incremented where the thing happens: accepted and refused in the gateway, settled
(typed, failed, rejected) where the mailbox writes the projection. That write may run again (a
local activity re-executed after a lost workflow task), so each event is counted once per
process, by id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock, Thread
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

from agentcomms.address import split_address
from agentcomms.errors import ListenerUnavailable
from agentcomms.http_guard import Doorman
from agentcomms.models import Agent, Event

log = logging.getLogger(__name__)

ACCEPTED = Counter(
    "agentcomms_messages_accepted",
    "Messages and interrupts made durable in an agent's mailbox",
    ["channel_kind"],
)
DELIVERED = Counter("agentcomms_messages_delivered", "Messages typed into their agent's pane")
FAILED = Counter(
    "agentcomms_messages_failed", "Messages given up on (not typed, or not sent)", ["reason"]
)
REJECTED = Counter(
    "agentcomms_messages_rejected", "Messages refused (nothing queued, or never typed)", ["reason"]
)
PENDING = Gauge("agentcomms_mailbox_pending", "Messages waiting in an agent's mailbox", ["agent"])
DELIVERY_SECONDS = Histogram(
    "agentcomms_delivery_seconds",
    "From accepted to typed into the pane",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600),
)
PROVIDER_UP = Gauge(
    "agentcomms_provider_up", "1 when an enabled chat provider is connected", ["provider"]
)

_COUNTED_KEPT = 20_000
_counted: OrderedDict[str, None] = OrderedDict()
_counted_lock = Lock()


def _first_time(key: str) -> bool:
    with _counted_lock:
        if key in _counted:
            return False
        _counted[key] = None
        if len(_counted) > _COUNTED_KEPT:
            _counted.popitem(last=False)
        return True


def channel_kind(channel_id: str) -> str:
    """`telegram:42` → telegram; `agent:backend` → agent; `cli:local` → cli."""
    return channel_id.partition(":")[0] or "unknown"


def accepted(event: Event) -> None:
    ACCEPTED.labels(channel_kind=channel_kind(event.channel_id)).inc()


def refused(reason: str) -> None:
    REJECTED.labels(reason=reason).inc()


def _failure_reason(event: Event) -> str:
    if event.direction == "out":
        return "provider"
    error = (event.error or "").lower()
    if "missing from the projection" in error:
        return "text_missing"
    if "target" in error:
        return "invalid_target"
    return "delivery"


def settled(events: list[Event], agent: Agent | None = None) -> None:
    """Count what a mailbox (or outbox) settled, each event once; show its agent's queue."""
    for event in events:
        if event.status not in ("delivered", "failed", "rejected"):
            continue
        if not _first_time(f"{event.id}:{event.status}"):
            continue
        if event.status == "delivered":
            if event.direction == "in":
                DELIVERED.inc()
                if event.delivered_at is not None:
                    seconds = (event.delivered_at - event.created_at).total_seconds()
                    DELIVERY_SECONDS.observe(max(0.0, seconds))
        elif event.status == "failed":
            FAILED.labels(reason=_failure_reason(event)).inc()
        else:
            reason = "mailbox_full" if "mailbox full" in (event.error or "") else "refused"
            REJECTED.labels(reason=reason).inc()
    if agent is not None:
        PENDING.labels(agent=agent.id).set(agent.pending)


def providers_seen(statuses: list[dict[str, Any]]) -> None:
    for p in statuses:
        if p["status"] != "disabled":
            PROVIDER_UP.labels(provider=p["name"]).set(1 if p["status"] == "connected" else 0)


# ---- the endpoint -----------------------------------------------------------------------------


def free_loopback_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def temporal_runtime(sdk_address: str) -> Any:
    """A Temporal runtime whose SDK metrics are served at `sdk_address` (for Client.connect)."""
    from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

    return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=sdk_address)))


class MetricsServer:
    """`GET /metrics` at `address`: our metrics, then the SDK's (when it serves any)."""

    def __init__(
        self, address: str, *, sdk_address: str | None = None, names: Iterable[str] = ()
    ) -> None:
        self.address = address
        self._sdk_address = sdk_address
        self._names = list(names)  # server.allowed_hosts: more names it answers to
        self._before_scrape: list[Callable[[], None]] = []
        self._server: ThreadingHTTPServer | None = None

    def before_scrape(self, hook: Callable[[], None]) -> None:
        """Run `hook` before each scrape (e.g. read the chat providers' connections)."""
        self._before_scrape.append(hook)

    def _body(self) -> bytes:
        for hook in self._before_scrape:
            try:
                hook()
            except Exception:  # a metric a hook cannot read must not fail the scrape
                log.exception("metrics hook failed")
        body = generate_latest()
        if self._sdk_address:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://{self._sdk_address}/metrics", timeout=2) as r:
                    body += r.read()
        return body

    def start(self) -> None:
        host, port = split_address(self.address)
        outer = self
        doorman: Doorman | None = None

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                # Like every HTTP door: a web page rebinding its name to this port reads nothing
                # (the agents' names, their queues, the providers in use).
                assert doorman is not None
                named = self.headers.get("Host")
                why = doorman.host_refusal(named) or doorman.origin_refusal(
                    self.headers.get("Origin"), named or ""
                )
                if why is not None:
                    self.send_error(403, why)
                    return
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                body = outer._body()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # a scrape every 15 s is not news

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise ListenerUnavailable(
                f"metrics cannot listen on {self.address} ({exc.strerror or exc}): set "
                "metrics.address (or leave it unset for no metrics)"
            ) from None
        doorman = Doorman(host, self._server.server_address[1], names=self._names)
        self._server.daemon_threads = True
        Thread(target=self._server.serve_forever, name="metrics", daemon=True).start()
        log.info("metrics on http://%s/metrics", self.address)

    async def close(self) -> None:
        if self._server is not None:
            await asyncio.to_thread(self._server.shutdown)
            self._server.server_close()
            self._server = None
