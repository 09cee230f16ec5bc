"""Where the mailbox's time goes: an instrumented run of the product, measured from outside it.

Nothing in the product is edited. For this run only:

- an activity interceptor (on the client, so the worker picks it up) times every activity;
- thin wrappers time ``Mailbox.post`` / ``Mailbox._signal`` (the signal-with-start RPC), the
  store's writes and every tmux client ``TmuxAdapter._run`` starts, each tagged with its event id;
- the Temporal SDK's own metrics (Prometheus, scraped before and after) give workflow-task
  schedule-to-start and execution times and local-activity times;
- the workflows' histories give events and workflow tasks per message;
- a micro-measure compares the gateway's signal-with-start RPC with a plain signal.

The latency timeline follows one message at a time through the stages; the throughput run counts
what each message costs.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import socket
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import httpx
from sqlalchemy import event as sa_event
from temporalio import activity
from temporalio import client as temporal_client
from temporalio import worker as temporal_worker
from temporalio.api.enums.v1 import EventType
from temporalio.runtime import Runtime

from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.store import Store
from bench.experiments import (
    interrupt_under_backlog,
    projection_lock_stall,
    signal_rpc_costs,
    sqlite_write_contention,
)
from bench.measure import measure_throughput, message
from bench.pipelines import Mailbox, bench_runtime, dev_server
from bench.system import CpuMeter, summarize
from bench.watch import Watcher
from gateway.mailbox import Mailbox as GatewayMailbox
from workflows.agent import Registration

if TYPE_CHECKING:
    from bench.bench_mailbox import Bench

_event: contextvars.ContextVar[str | None] = contextvars.ContextVar("bench_event", default=None)


class Marks:
    """Timestamps (monotonic ns) per event id, and durations (ms) per operation."""

    def __init__(self) -> None:
        self.at: defaultdict[str, dict[str, int]] = defaultdict(dict)
        self.ms: defaultdict[str, list[float]] = defaultdict(list)

    def mark(self, event_id: str | None, name: str) -> None:
        if event_id is not None:
            self.at[event_id].setdefault(name, time.monotonic_ns())

    @contextmanager
    def timed(self, name: str, event_id: str | None = None) -> Iterator[None]:
        self.mark(event_id, f"{name} start")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name].append((time.perf_counter() - start) * 1000)
            self.mark(event_id, f"{name} end")


MARKS = Marks()


def _event_id_of(arg: Any) -> str | None:
    events = getattr(arg, "events", None)  # a ProjectionUpdate: time it for its newest event
    if events:
        return _event_id_of(events[-1])
    agent = getattr(arg, "agent", None)
    if events is not None and agent is not None:
        return _event_id_of(agent)
    for name in ("event_id", "last_delivered_event_id", "id"):
        value = getattr(arg, name, None)
        if isinstance(value, str) and value.startswith("evt_"):
            return value
    return None


class _TimedActivity(temporal_worker.ActivityInboundInterceptor):
    async def execute_activity(self, input: temporal_worker.ExecuteActivityInput) -> Any:
        info = activity.info()
        kind = "LA" if info.is_local else "activity"
        event_id = _event_id_of(input.args[0]) if input.args else None
        token = _event.set(event_id)
        try:
            with MARKS.timed(f"{kind} {info.activity_type}", event_id):
                return await self.next.execute_activity(input)
        finally:
            _event.reset(token)


class TimingInterceptor(temporal_client.Interceptor, temporal_worker.Interceptor):
    """Set on the client; a worker built on that client uses it for its activities too."""

    def intercept_activity(
        self, next: temporal_worker.ActivityInboundInterceptor
    ) -> temporal_worker.ActivityInboundInterceptor:
        return _TimedActivity(next)


def _wrap(
    owner: type, name: str, label: Callable[..., tuple[str, str | None]]
) -> Callable[[], None]:
    """Time `owner.name` (an async method); `label(*args)` names the call and its event id."""
    original = getattr(owner, name)

    @functools.wraps(original)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        what, event_id = label(*args, **kwargs)
        with MARKS.timed(what, event_id):
            return await original(*args, **kwargs)

    setattr(owner, name, timed)
    return lambda: setattr(owner, name, original)


def _tmux_label(_self: Any, _socket: Any, args: list[str], **_: Any) -> tuple[str, str | None]:
    kind = "tmux probe (show-options; display-message)" if args[0] == "show-options" else None
    return kind or "tmux type (send-keys; set-option x2; send-keys Enter)", _event.get()


@contextmanager
def instrumented() -> Iterator[None]:
    undo = [
        _wrap(GatewayMailbox, "post", lambda _s, e: ("gateway Mailbox.post", e.id)),
        _wrap(
            GatewayMailbox,
            "_signal",
            lambda _s, _a, sig, arg: (f"gateway signal-with-start ({sig})", _event_id_of(arg)),
        ),
        _wrap(Store, "record_event", lambda _s, e: ("store.record_event", None)),
        _wrap(Store, "settle_events", lambda _s, e: ("store.settle_events", None)),
        _wrap(Store, "upsert_agent", lambda _s, a: ("store.upsert_agent", None)),
        _wrap(TmuxAdapter, "_run", _tmux_label),
    ]
    try:
        yield
    finally:
        for restore in undo:
            restore()


class PoolCounter:
    """Counts the store's new SQLite connections and pool checkouts (SQLAlchemy pool events)."""

    def __init__(self, store: Store) -> None:
        self.opened = 0
        self.checkouts = 0
        engine = store.engine.sync_engine
        sa_event.listen(engine, "connect", self._on_connect)
        sa_event.listen(engine, "checkout", self._on_checkout)

    def _on_connect(self, *_: Any) -> None:
        self.opened += 1

    def _on_checkout(self, *_: Any) -> None:
        self.checkouts += 1

    def take(self, messages: int) -> dict[str, float]:
        out = {
            "connections_opened_per_message": round(self.opened / messages, 2),
            "checkouts_per_message": round(self.checkouts / messages, 2),
        }
        self.opened = self.checkouts = 0
        return out


# ---- the SDK's metrics ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(url: str) -> dict[str, float]:
    """Histogram sums and counts and counters, keyed `name{activity_type,workflow_type}`."""
    values: dict[str, float] = {}
    for line in httpx.get(url, timeout=10).text.splitlines():
        if not line or line.startswith("#") or "_bucket{" in line:
            continue
        name, _, value = line.rpartition(" ")
        metric, _, labels = name.partition("{")
        kept = [
            part
            for part in labels.rstrip("}").split(",")
            if part.split("=")[0] in ("activity_type", "workflow_type")
        ]
        key = metric + ("{" + ",".join(kept) + "}" if kept else "")
        values[key] = values.get(key, 0.0) + float(value)
    return values


def metric_means(before: dict[str, float], after: dict[str, float]) -> dict[str, dict[str, float]]:
    """For each histogram: how many observations in the window and their mean (ms)."""
    out: dict[str, dict[str, float]] = {}
    for key, total in after.items():
        metric, _, labels = key.partition("{")
        if not metric.endswith("_sum"):
            continue
        base = metric[: -len("_sum")]
        count_key = base + "_count" + ("{" + labels if labels else "")
        count = after.get(count_key, 0.0) - before.get(count_key, 0.0)
        if count <= 0:
            continue
        name = base.removeprefix("temporal_") + ("{" + labels if labels else "")
        out[name] = {
            "count": count,
            "mean_ms": round((total - before.get(key, 0.0)) / count, 2),
        }
    return out


# ---- the run -------------------------------------------------------------------------------------


_PROBE = "tmux probe (show-options; display-message)"
_TYPE = "tmux type (send-keys; set-option x2; send-keys Enter)"
_SIGNAL = "gateway signal-with-start (enqueue)"
PATH = [
    ("socket -> gateway Mailbox.post", "send", "gateway Mailbox.post start"),
    ("signal-with-start RPC", f"{_SIGNAL} start", f"{_SIGNAL} end"),
    (
        "signal accepted -> deliver_to_pane starts (server, poll, activation)",
        f"{_SIGNAL} end",
        "LA deliver_to_pane start",
    ),
    ("deliver_to_pane -> probe tmux client starts", "LA deliver_to_pane start", f"{_PROBE} start"),
    ("probe tmux client (spawn, run, exit)", f"{_PROBE} start", f"{_PROBE} end"),
    ("probe end -> typing tmux client starts", f"{_PROBE} end", f"{_TYPE} start"),
    ("typing tmux client starts -> text visible", f"{_TYPE} start", "visible"),
]
AFTER = [
    ("visible -> deliver_to_pane returns", "visible", "LA deliver_to_pane end"),
    (
        "record_projection LA (settled events, agent row)",
        "LA record_projection start",
        "LA record_projection end",
    ),
    ("gateway store.record_event after the signal", f"{_SIGNAL} end", "gateway Mailbox.post end"),
]
PREVIOUS_TASK = "of which: the previous message's record_projection still running"


def _latency_stages(marks: Marks, event_ids: list[str], arrived: dict[str, int]) -> dict[str, Any]:
    """Median and p95 ms of each stage of each message's way, from the marks."""
    at = {e: {**marks.at[e], "visible": arrived[e]} for e in event_ids}

    def stage(spans: list[float]) -> dict[str, float]:
        s = summarize(spans)
        return {
            "median_ms": round(statistics.median(spans), 2),
            "p95_ms": s["p95"],
            "n": len(spans),
        }

    out: dict[str, Any] = {"path": {}, "after_visible": {}}
    for section, rows in (("path", PATH), ("after_visible", AFTER)):
        for label, start, end in rows:
            spans = [(a[end] - a[start]) / 1e6 for a in at.values() if start in a and end in a]
            if spans:
                out[section][label] = stage(spans)
    # Sent as soon as the previous one is visible, a message's signal may land while the previous
    # message's workflow task is still writing the projection; its task cannot start before that.
    waits = [
        max(0, at[prev].get("LA record_projection end", 0) - at[cur][f"{_SIGNAL} end"]) / 1e6
        for prev, cur in itertools.pairwise(event_ids)
        if f"{_SIGNAL} end" in at[cur]
    ]
    if waits:
        out["path_extra"] = {PREVIOUS_TASK: stage(waits)}
    out["send -> visible"] = summarize([(a["visible"] - a["send"]) / 1e6 for a in at.values()])
    return out


async def profile_mailbox(bench: Bench) -> dict[str, Any]:
    """The instrumented run; its own dev server, with the SDK's metrics served."""
    address = f"127.0.0.1:{_free_port()}"
    previous = Runtime.default()
    Runtime.set_default(bench_runtime(metrics_address=address), error_if_already_set=False)
    MARKS.at.clear()
    MARKS.ms.clear()
    try:
        async with (
            dev_server(
                bench.workdir / "temporal-profile.db", interceptors=[TimingInterceptor()]
            ) as server,
            Mailbox.running(server.client, bench.workdir / "profile") as pipeline,
        ):
            with instrumented():
                result = await _profile_runs(bench, pipeline, f"http://{address}/metrics")
            print("  profile: interrupt behind a queue, signal RPCs, SQLite writes…", flush=True)
            result["interrupt_under_backlog"] = await interrupt_under_backlog(
                pipeline,
                bench.watcher,
                bench.recorder("profile", "int"),
                queued=40,
                size=bench.args.size,
                submit_delay_ms=Registration.model_fields["submit_delay_ms"].default,
            )
            if bench.args.projection_lock:
                print("  profile: projection write lock held by another process…", flush=True)
                result["projection_lock_stall"] = await projection_lock_stall(
                    pipeline,
                    bench.watcher,
                    bench.recorder("profile", "lock"),
                    bench.workdir / "profile" / "agentcomms.db",
                )
            result["signal_rpc"] = await signal_rpc_costs(server.client)
            agents = [f"profile-a{i:02d}" for i in range(bench.args.agents)]
            result["history"] = await _history_per_message(
                server.client, agents, bench.args.agents * (bench.args.messages + 1)
            )
        result["sqlite_write_contention"] = await sqlite_write_contention(bench.workdir)
        result["warnings"] = bench.warnings.take()
        return result
    finally:
        Runtime.set_default(previous, error_if_already_set=False)


async def _profile_runs(bench: Bench, pipeline: Mailbox, metrics_url: str) -> dict[str, Any]:
    args, watcher = bench.args, bench.watcher
    pool = PoolCounter(pipeline.store)
    rec = bench.recorder("profile", "lat")
    await watcher.add(rec.key, rec.file)
    await pipeline.add_agent(rec.key, rec.pane)
    for i in range(args.warmup):
        await _send_marked(pipeline, watcher, rec.key, message("warm", i, args.size), {})
    out: dict[str, Any] = {}
    for label, count, pause in (
        ("back_to_back", min(args.latency_messages, 100), 0.0),
        ("isolated", 30, 0.1),
    ):
        MARKS.ms.clear()
        pool.take(1)
        before = scrape(metrics_url)
        arrived: dict[str, int] = {}
        event_ids = []
        for i in range(count):
            text = message(f"{label[:3]}", i, args.size)
            event_ids.append(await _send_marked(pipeline, watcher, rec.key, text, arrived))
            await asyncio.sleep(pause)
        out[label] = {
            "messages": count,
            "pause_after_each_s": pause,
            "stages": _latency_stages(MARKS, event_ids, arrived),
            "ops_per_message": _ops_per_message(count),
            "sdk_metrics": metric_means(before, scrape(metrics_url)),
            "sqlite_pool": pool.take(count),
        }

    recs = [bench.recorder("profile", f"a{i:02d}") for i in range(args.agents)]
    MARKS.ms.clear()
    pool.take(1)
    before = scrape(metrics_url)
    throughput = await measure_throughput(
        pipeline,
        watcher,
        recs,
        per_agent=args.messages,
        size=args.size,
        cpu=CpuMeter(),
        timeout_s=args.timeout,
    )
    total = args.agents * (args.messages + 1)  # with the warm-up message each
    out["throughput"] = {
        **{k: throughput[k] for k in ("messages", "seconds", "per_s", "verified")},
        "ops_per_message": _ops_per_message(total),
        "sdk_metrics": metric_means(before, scrape(metrics_url)),
        "sqlite_pool": pool.take(total),
    }
    return out


async def _send_marked(
    pipeline: Mailbox, watcher: Watcher, key: str, text: str, arrived: dict[str, int]
) -> str:
    seen = len(watcher.arrivals(key))
    sent = time.monotonic_ns()
    reply = await pipeline.call(key, "send", agent_id=key, message=text)
    event_id = str(reply["event_id"])
    MARKS.at[event_id]["send"] = sent
    if not await watcher.wait_for(key, seen + 1, 30):
        raise AssertionError(f"profile: {text[:20]!r} never arrived")
    arrived[event_id] = watcher.arrivals(key)[seen][0]
    return event_id


async def _history_per_message(
    client: temporal_client.Client, agent_ids: list[str], messages: int
) -> dict[str, Any]:
    counts: defaultdict[str, int] = defaultdict(int)
    size = 0
    for agent_id in agent_ids:
        history = await client.get_workflow_handle(f"agent-{agent_id}").fetch_history()
        size += len(history.to_json())
        for event in history.events:
            counts[EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")] += 1
    return {
        "events_per_message": round(sum(counts.values()) / messages, 2),
        "workflow_tasks_per_message": round(counts["WORKFLOW_TASK_COMPLETED"] / messages, 2),
        "history_json_bytes_per_message": round(size / messages),
        "by_type": dict(sorted(counts.items(), key=lambda kv: -kv[1])),
    }


def _ops_per_message(messages: int) -> dict[str, dict[str, float]]:
    return {
        name: {
            "per_message": round(len(values) / messages, 2),
            "mean_ms": round(statistics.fmean(values), 2),
            "ms_per_message": round(sum(values) / messages, 2),
        }
        for name, values in sorted(MARKS.ms.items())
        if values
    }
