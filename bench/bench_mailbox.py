"""Send→pane latency, throughput and CPU per message of the mailbox, beside bare pipelines.

    .venv/bin/python -m bench.bench_mailbox [--agents 5] [--messages 20] [--latency-messages 100]

Each pipeline types into tmux panes running ``stty raw -echo; exec cat >> FILE``:

- ``tmux``: one ``tmux send-keys -l -- TEXT ; send-keys Enter`` subprocess per message (the floor);
- ``bridge``: the product's ``TmuxAdapter.deliver`` alone, no Temporal;
- ``bare-activity`` / ``bare-local``: one minimal workflow per agent; a signal queues the text and
  its loop types it through ONE ordinary / ONE local activity doing the direct send-keys;
- ``mailbox``: the product: ``send`` on the gateway socket → AgentWorkflow → local activity.

Exits non-zero when a throughput run lost, duplicated or reordered a message. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from agentcomms.bridge import TmuxAdapter
    from agentcomms.client import GatewayClient
    from agentcomms.ids import new_event_id
    from agentcomms.models import PaneTarget, Typing
    from bench.common import (
        Pane,
        Tmux,
        Watcher,
        count_warnings,
        cpu_seconds,
        machine,
        profiled,
        rss_mb,
        server_pids,
        summarize,
        temporal,
        write_results,
    )

PIPELINES = ("tmux", "bridge", "bare-activity", "bare-local", "mailbox")
TIMEOUT_S = 120

# ---- the bare Temporal pipeline ----------------------------------------------------------------


class TypeText(BaseModel):
    target: str
    socket: str
    text: str


class BareInput(BaseModel):
    target: str
    socket: str
    local: bool
    pending: list[str] = Field(default_factory=list)  # carried across continue-as-new


def words(typed: str) -> str:
    """What was sent, from what a pane shows: `agentcomms send` puts its header first."""
    return typed.split("] ", 1)[1] if typed.startswith("[cli:local") else typed


async def send_keys(target: str, socket: str, text: str) -> None:
    """One tmux invocation: type `text` literally, press Enter (`text` must not end in ';')."""
    proc = await asyncio.create_subprocess_exec(
        "tmux", "-S", socket, "send-keys", "-t", target, "-l", "--", text,
        ";", "send-keys", "-t", target, "Enter",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"tmux send-keys failed: {err.decode(errors='replace').strip()}")


@activity.defn(name="bench_type_text")
async def type_text(req: TypeText) -> None:
    await send_keys(req.target, req.socket, req.text)


@workflow.defn(name="BarePipeline", sandboxed=False)  # as the mailbox runs
class BarePipeline:
    """The least Temporal can do per message: no projection, no probe, no de-duplication."""

    @workflow.init
    def __init__(self, input: BareInput) -> None:
        self._pending = list(input.pending)

    @workflow.signal
    def enqueue(self, text: str) -> None:
        self._pending.append(text)

    @workflow.run
    async def run(self, input: BareInput) -> None:
        info = workflow.info()
        while True:
            await workflow.wait_condition(
                lambda: bool(self._pending) or info.is_continue_as_new_suggested()
            )
            if info.is_continue_as_new_suggested():
                break
            req = TypeText(target=input.target, socket=input.socket, text=self._pending[0])
            timeout = timedelta(seconds=10)
            if input.local:
                await workflow.execute_local_activity(
                    type_text, req, start_to_close_timeout=timeout
                )
            else:
                await workflow.execute_activity(type_text, req, start_to_close_timeout=timeout)
            self._pending.pop(0)
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(input.model_copy(update={"pending": self._pending}))


# ---- the pipelines, behind one interface -------------------------------------------------------


class Pipeline(Protocol):
    name: str
    server_pids: list[int]

    async def add_agent(self, key: str, pane: Pane) -> None: ...

    async def send(self, key: str, text: str) -> None:
        """Submit one message; returns when the pipeline has accepted it."""


@dataclass
class DirectTmux:
    name: str = "direct tmux send-keys"
    server_pids: list[int] = field(default_factory=list)
    panes: dict[str, Pane] = field(default_factory=dict)

    async def add_agent(self, key: str, pane: Pane) -> None:
        self.panes[key] = pane

    async def send(self, key: str, text: str) -> None:
        await send_keys(self.panes[key].target, self.panes[key].socket, text)


@dataclass
class Bridge:
    name: str = "bridge: TmuxAdapter.deliver"
    server_pids: list[int] = field(default_factory=list)
    panes: dict[str, PaneTarget] = field(default_factory=dict)
    adapter: TmuxAdapter = field(default_factory=TmuxAdapter)

    async def add_agent(self, key: str, pane: Pane) -> None:
        self.panes[key] = PaneTarget(target=pane.target, socket=pane.socket)

    async def send(self, key: str, text: str) -> None:
        request = Typing(
            pane=self.panes[key], event_id=new_event_id(), text=text, submit_delay_ms=0
        )
        await self.adapter.deliver(request)


@dataclass
class Bare:
    client: Client
    local: bool
    name: str
    server_pids: list[int]
    queue: str = field(default_factory=lambda: f"bench-bare-{uuid.uuid4().hex[:8]}")
    handles: dict[str, WorkflowHandle[Any, Any]] = field(default_factory=dict)

    def worker(self) -> Worker:
        return Worker(
            self.client, task_queue=self.queue, workflows=[BarePipeline], activities=[type_text]
        )

    async def add_agent(self, key: str, pane: Pane) -> None:
        self.handles[key] = await self.client.start_workflow(
            BarePipeline.run,
            BareInput(target=pane.target, socket=pane.socket, local=self.local),
            id=f"bare-{key}",
            task_queue=self.queue,
        )

    async def send(self, key: str, text: str) -> None:
        await self.handles[key].signal(BarePipeline.enqueue, text)


@dataclass
class Mailbox:
    """The product, through its socket: one connection per agent, as each agent's CLI would."""

    socket: Path
    server_pids: list[int]
    name: str = "agentcomms mailbox"
    rpc: dict[str, GatewayClient] = field(default_factory=dict)

    async def connection(self, key: str) -> GatewayClient:
        if key not in self.rpc:
            self.rpc[key] = GatewayClient(self.socket)
            await self.rpc[key].connect()
        return self.rpc[key]

    async def add_agent(self, key: str, pane: Pane) -> None:
        rpc = await self.connection(key)
        await rpc.call(
            "register", agent_id=key, target=pane.target, socket=pane.socket, submit_delay_ms=0
        )

    async def send(self, key: str, text: str) -> None:
        await self.rpc[key].call("send", agent_id=key, message=text)

    async def close(self) -> None:
        for rpc in self.rpc.values():
            await rpc.close()


# ---- the measurements --------------------------------------------------------------------------


def message(prefix: str, index: int, size: int) -> str:
    """Exactly `size` characters (at least the prefix and index), unique per index."""
    head = f"{prefix}-{index:05d}-"
    return head + "x" * max(0, size - len(head))


@dataclass
class Bench:
    args: argparse.Namespace
    workdir: Path
    tmux: Tmux
    watcher: Watcher

    async def recorder(self, pipeline: Pipeline, key: str) -> str:
        file = self.workdir / f"{key}.bytes"
        pane = self.tmux.recorder(key, file)
        await self.watcher.add(key, file)
        await pipeline.add_agent(key, pane)
        return key

    async def send_and_wait(self, pipeline: Pipeline, key: str, text: str) -> tuple[float, float]:
        """One message, until it is in the pane: (ms until accepted, ms until in the pane)."""
        seen = len(self.watcher.arrivals(key))
        sent = time.monotonic_ns()
        await pipeline.send(key, text)
        accepted = time.monotonic_ns()
        if not await self.watcher.wait_for(key, seen + 1, 30):
            raise AssertionError(f"{pipeline.name}: {text[:20]!r} not in the pane after 30 s")
        arrived, got = self.watcher.arrivals(key)[seen]
        if words(got) != text:
            raise AssertionError(f"{pipeline.name}: expected {text!r} in the pane, got {got!r}")
        return (accepted - sent) / 1e6, (arrived - sent) / 1e6

    async def latency(self, pipeline: Pipeline, key: str, count: int) -> dict[str, Any]:
        """`count` messages one at a time, each sent when the previous one is in the pane."""
        a = self.args
        for i in range(a.warmup):
            await self.send_and_wait(pipeline, key, message("warm", i, a.size))
        times = [
            await self.send_and_wait(pipeline, key, message("lat", i, a.size)) for i in range(count)
        ]
        return {
            "visible_ms": summarize([v for _, v in times]),
            "accepted_ms": summarize([acc for acc, _ in times]),
        }

    async def throughput(self, pipeline: Pipeline, keys: list[str]) -> dict[str, Any]:
        """Every agent's sender submits its messages back to back, all agents at once."""
        a = self.args
        # One message each first: it starts the workflows and runs every code path once.
        await asyncio.gather(*(pipeline.send(k, message("warm", 0, a.size)) for k in keys))
        for k in keys:
            if not await self.watcher.wait_for(k, 1, TIMEOUT_S):
                raise AssertionError(f"{pipeline.name}: the warm-up message for {k} never arrived")
        expected = {k: [message(k, i, a.size) for i in range(a.messages)] for k in keys}
        errors: Counter[str] = Counter()
        accepted_ms: list[float] = []
        sent_at: dict[str, int] = {}

        async def sender(key: str) -> None:
            for text in expected[key]:
                sent = sent_at[text] = time.monotonic_ns()
                try:
                    await pipeline.send(key, text)
                except Exception as exc:  # counted and reported: an error reply is a finding
                    errors[f"{type(exc).__name__}: {exc}"] += 1
                accepted_ms.append((time.monotonic_ns() - sent) / 1e6)

        others = {"temporal server": pipeline.server_pids, "tmux server": [self.tmux.server_pid()]}
        cpu_before = cpu_seconds(others)
        started = time.monotonic_ns()
        with profiled(a.profile and pipeline.name == Mailbox.name):
            await asyncio.gather(*(sender(k) for k in keys))
            await asyncio.gather(
                *(self.watcher.wait_for(k, 1 + a.messages, TIMEOUT_S) for k in keys)
            )
        finished = max(self.watcher.arrivals(k)[-1][0] for k in keys)
        cpu = {n: v - cpu_before[n] for n, v in cpu_seconds(others).items()}
        total = a.messages * len(keys)
        seconds = (finished - started) / 1e9
        got = {k: [words(text) for _, text in self.watcher.arrivals(k)[1:]] for k in keys}
        lost = sum(len(set(expected[k]) - set(got[k])) for k in keys)
        duplicated = sum(len(got[k]) - len(set(got[k])) for k in keys)
        disordered = sum(1 for k in keys if got[k] != expected[k])
        # What a message of the burst waited, from its submit until it was in the pane.
        waited = [
            (arrived - sent_at[words(text)]) / 1e6
            for k in keys
            for arrived, text in self.watcher.arrivals(k)[1:]
            if words(text) in sent_at
        ]
        return {
            "messages": total,
            "per_s": round(total / seconds, 1),
            # Each sender waits for its last message to be accepted: this bounds msg/s.
            "accepted_mean_ms": round(statistics.fmean(accepted_ms), 1),
            "visible_ms": summarize(waited),
            "lost": lost,
            "duplicated": duplicated,
            "disordered_agents": disordered,
            "send_errors": dict(errors),
            "verified": not errors and disordered == 0,
            "cpu_ms_per_message": {n: round(v * 1000 / total, 2) for n, v in cpu.items()},
        }

    async def latency_of(self, pipeline: Pipeline, slug: str) -> dict[str, Any]:
        print(f"{pipeline.name}: latency…", flush=True)
        lat_key = await self.recorder(pipeline, f"{slug}-lat")
        return {
            "name": pipeline.name,
            "lat_key": lat_key,
            **await self.latency(pipeline, lat_key, self.args.latency_messages),
        }

    async def round_of(self, pipeline: Pipeline, slug: str, r: int) -> dict[str, Any]:
        """One throughput round on fresh agents, whose panes go once it is measured."""
        agents = [
            await self.recorder(pipeline, f"{slug}-r{r}-a{i:02d}") for i in range(self.args.agents)
        ]
        measured = await self.throughput(pipeline, agents)
        for key in agents:
            self.tmux.kill_session(key)
        return measured

    async def many_registered(self, mailbox: Mailbox, lat_key: str, extra: int) -> dict[str, Any]:
        """Send→pane p50 to one agent with `extra` idle agents registered (all on one idle pane),
        beside the figure measured before them, plus how long `agents` takes to answer."""
        connections = [await mailbox.connection(f"reg-{i}") for i in range(8)]
        registered = len((await connections[0].call("agents"))["agents"])
        before = await self.latency(mailbox, lat_key, self.args.latency_messages)
        rss_before = rss_mb()
        idle = self.tmux.recorder("idle", self.workdir / "idle.bytes")
        started = time.monotonic()

        async def register(first: int) -> None:
            for i in range(first, extra, len(connections)):
                await connections[first].call(
                    "register", agent_id=f"idle-{i:05d}", target=idle.target, socket=idle.socket
                )

        await asyncio.gather(*(register(i) for i in range(len(connections))))
        registering_s = time.monotonic() - started
        # Measure once every workflow has handled its registration and written its agent row.
        deadline = time.monotonic() + max(60, extra / 8)
        while time.monotonic() < deadline:
            listed = (await connections[0].call("agents"))["agents"]
            if sum(a["status"] == "online" for a in listed) >= registered + extra:
                break
            await asyncio.sleep(0.5)
        settled_s = time.monotonic() - started
        after = await self.latency(mailbox, lat_key, self.args.latency_messages)
        agents_ms = []
        for _ in range(5):
            t = time.perf_counter()
            listed = await connections[0].call("agents")
            agents_ms.append((time.perf_counter() - t) * 1000)
        return {
            "agents_before": registered,
            "extra_agents": extra,
            "agents_listed": len(listed["agents"]),
            "registering_s": round(registering_s, 1),
            "settled_s": round(settled_s, 1),
            "p50_ms_before": before["visible_ms"]["p50"],
            "p50_ms_with_extra": after["visible_ms"]["p50"],
            "accepted_p50_ms_before": before["accepted_ms"]["p50"],
            "accepted_p50_ms_with_extra": after["accepted_ms"]["p50"],
            "agents_call_ms": summarize(agents_ms),
            "rss_mb_before": rss_before,
            "rss_mb_with_extra": rss_mb(),
        }


@asynccontextmanager
async def pipeline_for(slug: str, workdir: Path) -> AsyncIterator[Pipeline]:
    """The pipeline and what it runs on: a fresh dev server (and home) for each Temporal one."""
    if slug == "tmux":
        yield DirectTmux()
    elif slug == "bridge":
        yield Bridge()
    elif slug == "mailbox":
        async with temporal(workdir / slug) as rt:
            mailbox = Mailbox(socket=rt.cfg.server.socket(), server_pids=server_pids(rt))
            try:
                yield mailbox
            finally:
                await mailbox.close()
    else:
        async with temporal(workdir / slug, product=False) as rt:
            local = slug == "bare-local"
            name = f"bare Temporal, {'local' if local else 'ordinary'} activity"
            bare = Bare(rt.client, local=local, name=name, server_pids=server_pids(rt))
            async with bare.worker():
                yield bare


async def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="acb-"))  # short: a socket path has 108 bytes
    warnings = count_warnings()
    tmux = Tmux(workdir / "tmux.sock")
    watcher = await Watcher.start()
    bench = Bench(args, workdir, tmux, watcher)
    results: dict[str, Any] = {"machine": machine(), "parameters": vars(args), "pipelines": {}}
    runs: dict[str, dict[str, Any]] = results["pipelines"]
    try:
        async with AsyncExitStack() as stack:
            pipelines = {
                s: await stack.enter_async_context(pipeline_for(s, workdir)) for s in args.only
            }
            for slug, pipeline in pipelines.items():
                warnings.take()
                runs[slug] = await bench.latency_of(pipeline, slug)
                runs[slug]["warnings"] = Counter(warnings.take())
            # The rounds take turns, every pipeline's r-th round beside the others': what else the
            # machine does then weighs on them alike, and each round has a like-for-like ratio.
            rounds: dict[str, list[dict[str, Any]]] = {s: [] for s in pipelines}
            for r in range(args.rounds):
                for slug, pipeline in pipelines.items():
                    rounds[slug].append(await bench.round_of(pipeline, slug, r))
                    runs[slug]["warnings"].update(warnings.take())
            for slug, pipeline in pipelines.items():
                run = runs[slug]
                run["throughput"] = median_round(rounds[slug])
                if "bare-local" in rounds:
                    run["throughput"]["vs_bare_local"] = paired(rounds[slug], rounds["bare-local"])
                if args.registered and isinstance(pipeline, Mailbox):
                    run["registered"] = await bench.many_registered(
                        pipeline, run["lat_key"], args.registered
                    )
                run["warnings"] = dict(run["warnings"] + Counter(warnings.take()))
                tmux.kill_session(run.pop("lat_key"))
                v, t = run["visible_ms"], run["throughput"]
                print(f"{pipeline.name}: p50 {v['p50']} ms, p99 {v['p99']} ms, {t['per_s']} msg/s, "
                      f"verified {t['verified']}", flush=True)  # fmt: skip
    finally:
        await watcher.close()
        tmux.kill_server()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def paired(rounds: list[dict[str, Any]], base: list[dict[str, Any]]) -> dict[str, Any]:
    """Each round's msg/s over the bare local pipeline's in the same turn, and their median."""
    ratios = sorted(t["per_s"] / b["per_s"] for t, b in zip(rounds, base, strict=True))
    return {"median": round(ratios[len(ratios) // 2], 2), "rounds": [round(x, 2) for x in ratios]}


def median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The throughput round with the median rate (a short round swings with whatever else the
    machine does), with every round's rate and every round's losses."""
    median = dict(sorted(rounds, key=lambda t: t["per_s"])[len(rounds) // 2])
    median["rounds_per_s"] = [t["per_s"] for t in rounds]
    for count in ("lost", "duplicated", "disordered_agents"):
        median[count] = sum(t[count] for t in rounds)
    median["send_errors"] = dict(sum((Counter(t["send_errors"]) for t in rounds), Counter()))
    median["verified"] = all(t["verified"] for t in rounds)
    return median


def markdown(results: dict[str, Any]) -> str:
    m, p, runs = results["machine"], results["parameters"], results["pipelines"]
    base = runs.get("bare-local")
    lines = [
        f"# Mailbox benchmark, {m['date']}",
        "",
        f"{m['cpus']} CPUs, {m['tmux']}, Python {m['python']}, temporalio {m['temporalio']}, "
        f"load average {m['load_average']} at start. Latency: {p['latency_messages']} messages "
        f"one at a time. Throughput: {p['agents']} agents x {p['messages']} messages at once, "
        f"the median of {p.get('rounds', 1)} rounds, the pipelines taking turns. "
        f"{p['size']} characters per message.",
        "",
        "| pipeline | p50 ms | p95 ms | p99 ms | accepted p50 ms | msg/s | accepted mean ms, "
        "throughput | p50 / p99 ms, throughput | lost / dup / disordered | CPU ms/msg, bench "
        "process | CPU ms/msg, all | p50, msg/s vs bare local |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in runs.values():
        v, t = r["visible_ms"], r["throughput"]
        cpu = t["cpu_ms_per_message"]
        vs = "-"
        if base:
            vs = f"{v['p50'] / base['visible_ms']['p50']:.2f}x, {t['vs_bare_local']['median']:.2f}x"
        check = f"{t['lost']} / {t['duplicated']} / {t['disordered_agents']}"
        check += " ✓" if t["verified"] else f" ✗ {t['send_errors'] or ''}"
        burst = f"{t['visible_ms']['p50']} / {t['visible_ms']['p99']}"
        lines.append(
            f"| {r['name']} | {v['p50']} | {v['p95']} | {v['p99']} | {r['accepted_ms']['p50']} | "
            f"{t['per_s']} | {t['accepted_mean_ms']} | {burst} | {check} | {cpu['bench process']} | "
            f"{sum(cpu.values()):.2f} | {vs} |"
        )
    lines += [
        "",
        "CPU ms/msg, all: the bench process (client, worker, gateway), the tmux clients it "
        "started, the tmux server and the Temporal server, during the median throughput round. "
        "Accepted mean, throughput: how long a send took in that round; each agent's sender "
        "waits for one before the next, so msg/s is about agents / that time. p50 / p99, "
        "throughput: from a message's submit until it is in the pane, in that round.",
        "",
        "msg/s of every round: "
        + "; ".join(f"{r['name']} {r['throughput']['rounds_per_s']}" for r in runs.values()),
    ]
    if base:
        lines += [
            "",
            "msg/s vs bare local: the median of each round's ratio to the bare local pipeline's "
            "round of the same turn (the pipelines' rounds take turns), sorted: "
            + "; ".join(
                f"{r['name']} {r['throughput']['vs_bare_local']['rounds']}"
                for slug, r in runs.items()
                if slug != "bare-local"
            ),
        ]
    reg = runs.get("mailbox", {}).get("registered")
    if reg:
        lines += [
            "",
            f"With {reg['extra_agents']} more agents registered ({reg['agents_listed']} listed, "
            f"registered in {reg['registering_s']} s, all online after {reg['settled_s']} s): send→pane p50 {reg['p50_ms_with_extra']} "
            f"ms, against {reg['p50_ms_before']} ms with {reg['agents_before']} (send accepted "
            f"p50 {reg['accepted_p50_ms_with_extra']} ms against {reg['accepted_p50_ms_before']}); "
            f"`agents` answers in "
            f"{reg['agents_call_ms']['p50']} ms (p50); the bench process (worker, gateway) holds "
            f"{reg['rss_mb_with_extra']} MB, against {reg['rss_mb_before']} MB before.",
        ]
    for slug, r in runs.items():
        lines += [f"- {slug}: {n} x {text}" for text, n in r["warnings"].items()]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_mailbox", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    add = parser.add_argument
    add("--agents", type=int, default=5, help="agents (panes) in the throughput run")
    add("--messages", type=int, default=20, help="messages per agent in the throughput run")
    add("--rounds", type=int, default=5, help="throughput rounds; the median is shown")
    add("--latency-messages", type=int, default=100, help="messages sent one at a time")
    add("--warmup", type=int, default=5, help="latency warm-up messages, not counted")
    add("--size", type=int, default=64, help="characters per message")
    add("--only", nargs="+", choices=PIPELINES, default=list(PIPELINES), help="these pipelines")
    add("--registered", type=int, default=0, metavar="N",
        help="mailbox: then register N idle agents and measure send→pane p50 again")  # fmt: skip
    add("--profile", action="store_true",
        help="print the mailbox throughput run's top functions (slows that run)")  # fmt: skip
    add("--no-save", dest="save", action="store_false", help="print only")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = asyncio.run(run(args))
    report = markdown(results)
    print("\n" + report)
    if args.save:
        write_results("mailbox", results, report)
    failed = [s for s, r in results["pipelines"].items() if not r["throughput"]["verified"]]
    if failed:
        print(f"FAILED: messages lost, duplicated or out of order in {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
