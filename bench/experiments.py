"""Small targeted measurements behind the profile's findings.

- ``signal_rpc_costs``: the gateway's signal-with-start RPC against a plain signal.
- ``sqlite_write_contention``: the projection store's writes, one writer against many at once.
- ``interrupt_under_backlog``: how long an interrupt takes to reach a pane with a queue in front.
- ``projection_lock_stall``: sends and deliveries while another process holds the projection's
  write lock (optional: ``--projection-lock``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy

from agentcomms.ids import new_event_id
from agentcomms.models import Event
from agentcomms.store import Store
from bench.measure import Recorder, message
from bench.pipeline import BareInput, BarePipeline, Pane
from bench.pipelines import Mailbox
from bench.system import summarize
from bench.watch import Watcher


async def signal_rpc_costs(client: Client, count: int = 200) -> dict[str, Any]:
    """ms per RPC: signal-with-start (as the gateway sends it) and a plain signal, same workflow.

    The workflow's queue has no worker, so only the RPC and the server's write are measured.
    """
    queue = f"bench-idle-{uuid.uuid4().hex[:8]}"
    start_input = BareInput(pane=Pane(target="none:0.0", socket="/nonexistent"), local=True)
    workflow_id = f"bench-rpc-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        BarePipeline.run, start_input, id=workflow_id, task_queue=queue
    )
    with_start, plain = [], []
    for i in range(count):
        t = time.perf_counter()
        await client.start_workflow(
            BarePipeline.run,
            start_input,
            id=workflow_id,
            task_queue=queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal="enqueue",
            start_signal_args=[f"s{i}"],
        )
        with_start.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        await handle.signal(BarePipeline.enqueue, f"p{i}")
        plain.append((time.perf_counter() - t) * 1000)
    await handle.terminate("bench over")
    return {"signal_with_start_ms": summarize(with_start), "signal_ms": summarize(plain)}


async def sqlite_write_contention(workdir: Path, writes: int = 400) -> dict[str, Any]:
    """`Store.record_event` on a fresh SQLite file: 1 writer, 20 at once, 20 behind one lock.

    The store gives each concurrent write its own pooled connection and takes the write lock at
    BEGIN (IMMEDIATE); a writer that finds it taken sleeps in SQLite's busy handler, in steps of
    up to 100 ms, however soon the lock is free again.
    """
    store = await Store.open(f"sqlite+aiosqlite:///{workdir / 'contention.db'}")
    results: dict[str, Any] = {}
    try:
        for label, writers, lock in (
            ("1 writer", 1, None),
            ("20 concurrent writers", 20, None),
            ("20 writers behind one asyncio.Lock", 20, asyncio.Lock()),
        ):
            times: list[float] = []

            async def writer(
                agent: str, count: int, lock: asyncio.Lock | None, times: list[float]
            ) -> None:
                for _ in range(count):
                    event = Event(
                        id=new_event_id(),
                        agent_id=agent,
                        channel_id="cli:local",
                        type="human_message",
                        role="human",
                        payload={"text": "x" * 64},
                    )
                    t = time.perf_counter()
                    if lock is None:
                        await store.record_event(event)
                    else:
                        async with lock:
                            await store.record_event(event)
                    times.append((time.perf_counter() - t) * 1000)

            cpu = time.process_time()
            started = time.perf_counter()
            await asyncio.gather(
                *(writer(f"a{k}", writes // writers, lock, times) for k in range(writers))
            )
            elapsed = time.perf_counter() - started
            results[label] = {
                "writes_per_s": round(len(times) / elapsed),
                # all threads of this process: the event loop's SQLAlchemy and aiosqlite's SQLite
                "cpu_ms_per_write": round((time.process_time() - cpu) * 1000 / len(times), 2),
                "latency_ms": summarize(times),
            }
    finally:
        await store.close()
    return results


async def interrupt_under_backlog(
    pipeline: Mailbox,
    watcher: Watcher,
    rec: Recorder,
    *,
    queued: int,
    size: int,
    submit_delay_ms: int,
) -> dict[str, Any]:
    """An agent comes back to `queued` waiting messages; its human interrupts once typing starts.

    The messages are sent before the agent registers (as for an agent that was offline), so its
    workflow holds them all when it starts typing. The mailbox puts an interrupt ahead of queued
    messages: this measures how long C-c takes to reach the pane and how many messages are typed
    before it. The agent has the product's default submit delay, as a real one would.
    """
    await watcher.add(rec.key, rec.file)
    await pipeline.connect(rec.key)
    for i in range(queued):
        await pipeline.send(rec.key, message("q", i, size))
    await pipeline.call(
        rec.key,
        "register",
        agent_id=rec.key,
        target=rec.pane.target,
        socket=rec.pane.socket,
        submit_delay_ms=submit_delay_ms,
    )
    if not await watcher.wait_for(rec.key, 1, 30):
        return {"error": "the first queued message never arrived"}
    before = len(watcher.arrivals(rec.key))
    sent = time.monotonic_ns()
    await pipeline.call(rec.key, "interrupt", agent_id=rec.key, reason="bench")
    pressed = f"{rec.key}!"
    if not await watcher.wait_for(pressed, 1, 60):
        return {"error": "the interrupt never reached the pane within 60 s"}
    at = watcher.arrivals(pressed)[0][0]
    await watcher.wait_for(rec.key, queued, queued * (submit_delay_ms / 1000 + 0.2) + 30)
    typed_before = sum(1 for t, _ in watcher.arrivals(rec.key) if t < at)
    return {
        "queued_messages": queued,
        "submit_delay_ms": submit_delay_ms,
        "typed_before_the_interrupt_was_sent": before,
        "typed_after_it_was_sent_but_before_it": typed_before - before,
        "typed_after_it": len(watcher.arrivals(rec.key)) - typed_before,
        "interrupt_visible_ms": round((at - sent) / 1e6, 1),
    }


async def projection_lock_stall(
    pipeline: Mailbox, watcher: Watcher, rec: Recorder, database: Path, *, hold_s: float = 12
) -> dict[str, Any]:
    """Another process holds the SQLite projection's write lock for `hold_s`; two sends follow.

    Typing needs no database, so ideally both messages are typed at once and both sends succeed.
    """
    await watcher.add(rec.key, rec.file)
    await pipeline.add_agent(rec.key, rec.pane)
    await pipeline.send(rec.key, "first")
    await watcher.wait_for(rec.key, 1, 30)
    await asyncio.sleep(1)  # "first" is settled in the projection too
    locked = asyncio.Event()

    def hold() -> None:  # as a long write from the CLI, a backup, or the sqlite3 shell would
        conn = sqlite3.connect(database, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            loop.call_soon_threadsafe(locked.set)
            time.sleep(hold_s)
            conn.execute("COMMIT")
        finally:
            conn.close()

    loop = asyncio.get_running_loop()
    holder = asyncio.create_task(asyncio.to_thread(hold))
    await locked.wait()
    started = time.monotonic_ns()
    replies: dict[str, str] = {}

    async def send(text: str) -> None:
        try:
            await pipeline.send(rec.key, text)
            replies[text] = f"ok after {(time.monotonic_ns() - started) / 1e9:.1f} s"
        except Exception as exc:
            replies[text] = f"{exc} (after {(time.monotonic_ns() - started) / 1e9:.1f} s)"

    second = asyncio.create_task(send("second"))
    await asyncio.sleep(0.2)  # so that the order is defined
    await asyncio.gather(second, send("third"), holder)
    await watcher.wait_for(rec.key, 3, 60)
    return {
        "lock_held_s": hold_s,
        "send_replies": replies,
        "typed_after_s": {
            text: round((at - started) / 1e9, 2) for at, text in watcher.arrivals(rec.key)[1:]
        },
    }
