"""The whole deployment for a bounded time under a mix of traffic, while its parts are killed at
random (`kill -9`, then started again): the Temporal dev server (on its database file), the
worker (`agentcomms worker`) and the gateway (`agentcomms gateway`), each a process of its own,
as on a machine that runs them apart.

Traffic: each agent (a pane in a private tmux server, or a process agent: the tests' scripted
ACP agent, which the worker runs and prompts) gets the human's messages (`send` on the gateway's
socket, retried with its event id until accepted, as `agentcomms send` is retry-safe) and
messages from the next agent (`agent_message`, sent once: one refused while the gateway is down
is not sent again); the first agent also gets Alice's Telegram messages (the tests' fake Bot
API, which keeps each until the gateway takes it) and asks for approvals that are answered, then
answered again. Every few seconds a newcomer registers and is sent three messages at once, so
mailboxes start afresh while parts die, not only before.

It fails, and says which, on any message accepted but never typed (or prompted) or typed twice,
any two messages of one sender typed out of order, any approval answered twice or never closed;
it counts what was lost and doubled for each agent. It reports how long each part took to
recover after each kill: from the kill to the first message sent after it typed in a probe pane.

    .venv/bin/python -m bench.soak                      # ten minutes
    .venv/bin/python -m bench.soak --seconds 60 --kill-every 8 --agents 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentcomms.client import call
from agentcomms.config import TemporalConfig
from agentcomms.ids import new_event_id
from agentcomms.temporal import dev_server_args
from bench.common import Tmux, free_port, machine, summarize, write_results
from tests.fakes.telegram import FakeTelegram
from tests.support import acp_agent

AGENTCOMMS = str(Path(sys.executable).parent / "agentcomms")
PARTS = ("temporal", "worker", "gateway")
KEY = "soak-deployment-key-" + "k" * 32
CHAT = 456  # Alice's chat with the bot
# How long a part may take to answer again before the soak calls it stuck.
PATIENCE_S = 120


@dataclass
class Part:
    """One process of the deployment, started again after each kill."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=out, stderr=out)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Ledger:
    """What was accepted, what was refused, and what the panes show."""

    accepted: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    refused: int = 0
    approvals: dict[str, int] = field(default_factory=dict)  # id -> answers accepted
    recoveries: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    kills: list[tuple[float, str]] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)  # what the deployment did not answer in time


class Deployment:
    def __init__(self, home: Path, port: int, telegram: FakeTelegram, chat_agent: str) -> None:
        self.home = home
        self.socket = home / "daemon.sock"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCOMMS_")}
        env["AGENTCOMMS_HOME"] = str(home)
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        config = {
            "temporal": {"address": f"127.0.0.1:{port}"},
            "security": {"deployment_key": KEY},
            "console": {"enabled": False},
            # Alice's Telegram chat, on the Bot API's fake, mapped to the first agent.
            "chat": {
                "telegram": {
                    "enabled": True,
                    "token": telegram.token,
                    "base_url": telegram.base_url,
                },
                "channels": {f"telegram:{CHAT}": chat_agent},
                "allowed_senders": {"telegram": [str(CHAT)]},
            },
        }
        (home / "config.json").write_text(json.dumps(config))
        (home / "config.json").chmod(0o600)
        temporal = TemporalConfig(address=f"127.0.0.1:{port}", db_filename=home / "temporal.db")
        logs = home / "logs"
        logs.mkdir()
        self.parts = {
            "temporal": Part("temporal", dev_server_args(temporal, headless=True), env, logs / "t"),
            "worker": Part("worker", [AGENTCOMMS, "worker"], env, logs / "worker"),
            "gateway": Part("gateway", [AGENTCOMMS, "gateway"], env, logs / "gateway"),
        }

    async def ask(self, method: str, **params: Any) -> Any:
        return await call(self.socket, method, **params)

    async def ask_until_answered(self, method: str, *, patience_s: float, **params: Any) -> Any:
        """Ask again while the gateway (or what it asks) is down; what it answered."""
        deadline = time.monotonic() + patience_s
        while True:
            try:
                return await self.ask(method, **params)
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


# ---- traffic -----------------------------------------------------------------------------------


async def human(dep: Deployment, agent: str, ledger: Ledger, stop: asyncio.Event) -> None:
    """The human's messages to one agent, each retried with its event id until accepted."""
    for k in range(1_000_000):
        if stop.is_set():
            return
        text, event_id = f"{agent} cli {k}", new_event_id()
        try:
            await dep.ask_until_answered(
                "send", patience_s=PATIENCE_S, agent_id=agent, message=text, event_id=event_id
            )
        except Exception as exc:
            ledger.stuck.append(f"send {text!r} not accepted in {PATIENCE_S:.0f} s: {exc}")
            return
        ledger.accepted[agent].append(text)
        await asyncio.sleep(0.3)


async def peer(dep: Deployment, src: str, dst: str, ledger: Ledger, stop: asyncio.Event) -> None:
    """One agent's messages to another, each sent once."""
    for k in range(1_000_000):
        if stop.is_set():
            return
        text = f"{dst} from {src} {k}"
        try:
            await dep.ask("agent_message", from_agent_id=src, to_agent_id=dst, message=text)
        except Exception:
            ledger.refused += 1  # never accepted: not expected in the pane
        else:
            ledger.accepted[dst].append(text)
        await asyncio.sleep(0.5)


async def chat(telegram: FakeTelegram, agent: str, ledger: Ledger, stop: asyncio.Event) -> None:
    """Alice's messages in her Telegram chat: Telegram keeps each until the gateway takes it."""
    for k in range(1_000_000):
        if stop.is_set():
            return
        text = f"{agent} chat {k}"
        telegram.human_says(CHAT, text)
        ledger.accepted[agent].append(text)
        await asyncio.sleep(0.7)


async def approver(dep: Deployment, agent: str, ledger: Ledger, stop: asyncio.Event) -> None:
    """Requests opened as a hook opens them, each answered, then answered again."""
    while not stop.is_set():
        try:
            opened = await dep.ask(
                "approval_open", kind="claude-code", agent_id=agent, tool_name="Bash",
                tool_input={"command": f"echo {time.monotonic()}"},
            )  # fmt: skip
        except Exception:
            await asyncio.sleep(1)
            continue
        approval = str(opened["id"])
        ledger.approvals[approval] = 0
        for _ in range(2):
            try:
                answer = await dep.ask_until_answered(
                    "approval_decide", patience_s=PATIENCE_S, id=approval, behavior="allow"
                )
            except Exception as exc:
                ledger.stuck.append(
                    f"approval {approval} not answered in {PATIENCE_S:.0f} s: {exc}"
                )
                return
            ledger.approvals[approval] += bool(answer.get("accepted"))
        await asyncio.sleep(1)


async def newcomers(
    dep: Deployment, tmux: Tmux, folder: Path, panes: dict[str, Path], ledger: Ledger,
    stop: asyncio.Event, every_s: float,
) -> None:  # fmt: skip
    """Agents that register while parts die, each with a few messages sent at once: each one's
    mailbox starts afresh then, and its first workflow tasks run amid the kills (where a retried
    first task once took its own registration for an old one and typed nothing)."""
    for n in range(1_000_000):
        if stop.is_set():
            return
        agent = f"n{n}"
        pane = folder / f"{agent}.bytes"
        target = await asyncio.to_thread(tmux.recorder, agent, pane)
        panes[agent] = pane
        try:
            await dep.ask_until_answered(
                "register", patience_s=PATIENCE_S, agent_id=agent, target=target.target,
                socket=tmux.socket, submit_delay_ms=0,
            )  # fmt: skip
            for k in range(3):
                text = f"{agent} cli {k}"
                await dep.ask_until_answered(
                    "send", patience_s=PATIENCE_S, agent_id=agent, message=text,
                    event_id=new_event_id(),
                )  # fmt: skip
                ledger.accepted[agent].append(text)
        except Exception as exc:
            ledger.stuck.append(f"newcomer {agent} not registered or sent to: {exc}")
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)


# ---- kills -------------------------------------------------------------------------------------


async def killer(
    dep: Deployment, ledger: Ledger, stop: asyncio.Event, every_s: float, rng: random.Random,
    probe: Path, start: float,
) -> None:  # fmt: skip
    n = 0
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s * rng.uniform(0.5, 1.5))
        if stop.is_set():
            return
        name = rng.choice(PARTS)
        killed = time.monotonic()
        dep.parts[name].kill()
        ledger.kills.append((round(killed - start, 1), name))
        dep.parts[name].start()
        n += 1
        text = f"probe {n}"
        try:
            await dep.ask_until_answered(
                "send", patience_s=PATIENCE_S, agent_id="probe", message=text,
                event_id=new_event_id(),
            )  # fmt: skip
            await asyncio.to_thread(arrives, probe, text.encode(), PATIENCE_S)
        except Exception as exc:
            ledger.stuck.append(f"{name} killed: not recovered in {PATIENCE_S:.0f} s: {exc}")
            return
        ledger.recoveries[name].append(time.monotonic() - killed)


def arrives(pane: Path, needle: bytes, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while needle not in pane.read_bytes():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{needle!r} never reached {pane}")
        time.sleep(0.02)


# ---- checks ------------------------------------------------------------------------------------

_TEXT = re.compile(rb"(\S+ (?:cli|chat|from \S+) \d+)")


def typed(pane: Path) -> list[str]:
    """The soak's texts in the order the pane took them."""
    return [m.decode() for m in _TEXT.findall(pane.read_bytes())]


def prompted(folder: Path) -> list[str]:
    """The soak's texts in the order a process agent working in `folder` was prompted with them
    (its log has each prompt; a process started again after a kill appends to it)."""
    return [
        m.decode()
        for entry in acp_agent.log_of(folder)
        if "prompt" in entry
        for m in _TEXT.findall(str(entry["prompt"]).encode())
    ]


@dataclass
class Tally:
    """What one agent got of what was accepted for it."""

    kind: str  # "pane" or "process"
    accepted: int = 0
    seen: int = 0  # typed into its pane, or prompted
    lost: int = 0
    doubled: int = 0
    out_of_order: int = 0


def problems(
    ledger: Ledger,
    seen: dict[str, list[str]],
    open_approvals: list[str],
    tallies: dict[str, Tally] | None = None,
) -> list[str]:
    """Everything wrong, one line each; `tallies` (one per agent, when given) gets the counts."""
    found: list[str] = []
    for agent, texts in seen.items():
        tally = (tallies or {}).setdefault(agent, Tally("pane"))
        verb = "prompted" if tally.kind == "process" else "typed"
        tally.accepted, tally.seen = len(ledger.accepted[agent]), len(texts)
        counts: dict[str, int] = defaultdict(int)
        for text in texts:
            counts[text] += 1
        for text in ledger.accepted[agent]:
            if counts[text] == 0:
                tally.lost += 1
                found.append(f"lost: {text!r} was accepted but never {verb}")
        for text, n in counts.items():
            if n > 1:
                tally.doubled += 1
                found.append(f"doubled: {text!r} {verb} {n} times")
        last: dict[str, int] = {}
        for text in texts:
            sender, _, k = text.rpartition(" ")
            if int(k) < last.get(sender, -1):
                tally.out_of_order += 1
                found.append(f"out of order: {text!r} after {sender} {last[sender]}")
            last[sender] = max(last.get(sender, -1), int(k))
    for approval, accepted in ledger.approvals.items():
        if accepted > 1:
            found.append(f"approval {approval} decided {accepted} times")
        if approval in open_approvals:
            found.append(f"approval {approval} never closed")
    return found


# ---- the run -----------------------------------------------------------------------------------


async def soak(
    seconds: float,
    agents: int,
    every_s: float,
    seed: int,
    *,
    process_agents: int = 1,
    newcomer_every_s: float = 5,
    keep: bool = False,
) -> dict[str, Any]:
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="agentcomms-soak-")
    if keep:
        print(f"kept in {tmp}", flush=True)
    with contextlib.ExitStack() as cleanup:
        if not keep:
            cleanup.callback(shutil.rmtree, tmp, ignore_errors=True)
        # The fake's long polls are cut when it stops: not the soak's to report.
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
        telegram = FakeTelegram()
        await telegram.server.start()
        dep = Deployment(Path(tmp) / "home", free_port(), telegram, "a0")
        tmux = Tmux(Path(tmp) / "tmux.sock")
        try:
            for name in PARTS:
                dep.parts[name].start()
            await dep.ask_until_answered("ping", patience_s=120)
            in_panes = [f"a{i}" for i in range(agents)]
            panes = {a: Path(tmp) / f"{a}.bytes" for a in [*in_panes, "probe"]}
            for agent, pane in panes.items():
                target = await asyncio.to_thread(tmux.recorder, agent, pane)
                await dep.ask_until_answered(
                    "register", patience_s=60, agent_id=agent, target=target.target,
                    socket=tmux.socket, submit_delay_ms=0,
                )  # fmt: skip
            # Process agents: the worker on this host runs each and prompts it over ACP.
            folders = {f"p{i}": Path(tmp) / f"p{i}" for i in range(process_agents)}
            for agent, folder in folders.items():
                folder.mkdir()
                await dep.ask_until_answered(
                    "start_agent", patience_s=60, agent_id=agent, dir=str(folder),
                    command=[sys.executable, acp_agent.__file__],
                )  # fmt: skip
            names = [*in_panes, *folders]
            ledger, stop, start = Ledger(), asyncio.Event(), time.monotonic()
            traffic = [
                *(human(dep, a, ledger, stop) for a in names),
                *(
                    peer(dep, a, names[(i + 1) % len(names)], ledger, stop)
                    for i, a in enumerate(names)
                ),
                approver(dep, names[0], ledger, stop),
                chat(telegram, names[0], ledger, stop),
                killer(dep, ledger, stop, every_s, rng, panes["probe"], start),
            ]
            newcomer_panes: dict[str, Path] = {}
            if newcomer_every_s > 0:
                traffic.append(
                    newcomers(dep, tmux, Path(tmp), newcomer_panes, ledger, stop, newcomer_every_s)
                )
            tasks = [asyncio.create_task(t) for t in traffic]
            await asyncio.sleep(seconds)
            stop.set()
            await asyncio.gather(*tasks)
            # Everything accepted is typed (or prompted) once the deployment is left alone.

            def seen() -> dict[str, list[str]]:
                return {
                    **{a: typed(panes[a]) for a in in_panes},
                    **{a: typed(pane) for a, pane in newcomer_panes.items()},
                    **{a: prompted(f) for a, f in folders.items()},
                }

            expected = sum(len(v) for v in ledger.accepted.values())
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if sum(len(texts) for texts in seen().values()) >= expected:
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(2)  # anything typed twice, late
            try:
                listed = await dep.ask_until_answered("approvals", patience_s=PATIENCE_S)
                still_open = [a["id"] for a in listed["approvals"]]
            except Exception as exc:
                ledger.stuck.append(f"the open approvals not listed: {exc}")
                still_open = []
            tallies = {
                **{a: Tally("pane") for a in in_panes},
                **{a: Tally("process") for a in folders},
            }
            newcomer_tally = Tally("pane")  # registered amid the kills
            arrived = {a: Tally("pane") for a in newcomer_panes}
            found = ledger.stuck + problems(ledger, seen(), still_open, tallies | arrived)
            # The newcomers are many and alike: one line for all of them.
            for t in arrived.values():
                for name in ("accepted", "seen", "lost", "doubled", "out_of_order"):
                    setattr(newcomer_tally, name, getattr(newcomer_tally, name) + getattr(t, name))
            if arrived:
                tallies[f"n0…n{len(arrived) - 1}"] = newcomer_tally
        finally:
            for name in reversed(PARTS):
                dep.parts[name].stop()
            tmux.kill_server()
            await telegram.server.stop()
    recoveries = {
        name: summarize([s * 1000 for s in times]) for name, times in ledger.recoveries.items()
    }
    return {
        "machine": machine(),
        "seconds": seconds,
        "agents": agents,
        "process_agents": process_agents,
        "newcomer_every_s": newcomer_every_s,
        "kill_every_s": every_s,
        "seed": seed,
        "kills": ledger.kills,
        "messages_accepted": sum(len(v) for v in ledger.accepted.values()),
        "messages_refused_while_down": ledger.refused,
        "approvals": len(ledger.approvals),
        "recovery_ms": recoveries,
        "by_agent": {a: dataclasses.asdict(t) for a, t in tallies.items()},
        "problems": found,
    }


def page(report: dict[str, Any]) -> str:
    lines = [
        "# Soak under random kills",
        "",
        f"{report['seconds']:.0f} s, {report['agents']} agents in panes and "
        f"{report.get('process_agents', 0)} process agents, a kill about every "
        f"{report['kill_every_s']:.0f} s (seed {report['seed']}): "
        f"{report['messages_accepted']} messages accepted "
        f"({report['messages_refused_while_down']} refused while the gateway was down), "
        f"{report['approvals']} approvals, {len(report['kills'])} kills.",
        "",
        "| part killed | kills | recovery p50 (ms) | max (ms) |",
        "|---|---|---|---|",
    ]
    for name, s in sorted(report["recovery_ms"].items()):
        lines.append(f"| {name} | {s['n']:.0f} | {s['p50']:.0f} | {s['max']:.0f} |")
    lines += [
        "",
        "| agent | kind | accepted | typed or prompted | lost | doubled | out of order |",
        "|---|---|---|---|---|---|---|",
    ]
    for agent, t in report.get("by_agent", {}).items():
        lines.append(
            f"| {agent} | {t['kind']} | {t['accepted']} | {t['seen']} | {t['lost']} | "
            f"{t['doubled']} | {t['out_of_order']} |"
        )
    kills = ", ".join(f"{name} at {at} s" for at, name in report["kills"])
    lines += ["", f"Kills: {kills or 'none'}."]
    found = report["problems"]
    lines += ["", f"Problems: {len(found) or 'none'}"]
    lines += [f"- {p}" for p in found[:20]]
    if len(found) > 20:
        lines.append(f"- and {len(found) - 20} more (all in the JSON results)")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600, help="how long the traffic runs")
    parser.add_argument("--agents", type=int, default=3, help="agents in panes")
    parser.add_argument(
        "--process-agents", type=int, default=1, help="process agents (the scripted ACP agent)"
    )
    parser.add_argument(
        "--newcomer-every",
        type=float,
        default=5,
        help="seconds between agents that register amid the kills (0: none)",
    )
    parser.add_argument("--kill-every", type=float, default=20, help="seconds between kills, about")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="the kills' dice")
    parser.add_argument("--keep", action="store_true", help="keep the homes, logs and panes")
    parser.add_argument("--no-write", action="store_true", help="print only, write no results")
    args = parser.parse_args()
    report = asyncio.run(
        soak(
            args.seconds,
            args.agents,
            args.kill_every,
            args.seed,
            process_agents=args.process_agents,
            newcomer_every_s=args.newcomer_every,
            keep=args.keep,
        )
    )
    print(page(report))
    if not args.no_write:
        write_results("soak", report, page(report))
    if report["problems"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
