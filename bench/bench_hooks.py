"""What agentcomms' hooks cost the agent: the time per tool call of the real Claude Code (or Codex,
or Gemini CLI), with and without the hooks `agentcomms install` writes, in the same run.

    .venv/bin/python -m bench.bench_hooks [--agent claude-code|codex|gemini] [--rounds 3] [--calls 20]

Each configuration gets its own Claude Code (npm, pinned; installed like the tests do) in a
private tmux server and HOME, in manual mode, its model the scripted fake of the tests: a prompt
answered with `--calls` Bash tool calls (`echo`, which manual mode runs without asking) and then
a text. A tool call's time is measured at the model's side: from the request that asked for it to
the request that brings its result back (the tool, Claude Code's own work, and the hooks around
it). Configurations take turns, one round each, so a busy moment hits each alike.

- ``none``: no hooks.
- ``trivial``: the same hooks, each running a script that reads its stdin and exits: the floor
  any hook costs.
- ``agentcomms``: the hooks as installed, running `agentcomms hook claude-code` of this checkout
  installed as the README installs it (``pip install .`` into a fresh virtualenv: a hook process
  starts as it does on a user's machine).
- ``agentcomms-editable``: the same hooks running this checkout's own virtualenv, an editable
  install, whose import finder every Python process of that virtualenv loads at start: what a
  developer's agent pays.
- ``trivial-http``: the same posted hooks to a server that answers each at once: the floor a
  posted hook costs.
- ``agentcomms-http``: the hooks as installed with the gateway's hook door on (the default):
  the reporting hooks posted by Claude Code to a real `agentcomms up` of this checkout, the
  deciding ones commands.

``--configs`` picks some (``none`` is always measured: it is the baseline).

With ``--agent codex`` or ``--agent gemini`` the agent is that one, its model the tests' scripted
fake too (Codex: ``echo`` through its shell tool, approvals never asked; Gemini CLI: its
``glob``, which never asks), its hooks trusted in Codex's own review as a person does.
There ``agentcomms-http`` is the hooks as installed with the door on: the reporting hooks posted
to the door by the shell the agent starts for each (Codex and Gemini CLI run only commands;
Codex's in the background, ``"async": true``), and Codex also has ``agentcomms-http-sync``: the
same posts as hooks Codex waits for.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentcomms.agents.install import AGENT_KINDS, AGENT_NAMES, AgentKind, Plan, Target, hook_url
from agentcomms.agents.install_agents import plan
from bench.common import machine, summarize, write_results
from tests.fakes.anthropic import FakeAnthropic, bash, text
from tests.fakes.gemini import FakeGemini
from tests.fakes.gemini import tool as gemini_tool
from tests.fakes.openai_responses import FakeResponses
from tests.fakes.openai_responses import shell as codex_shell
from tests.support.agents import (
    CODEX_HOOKS_REVIEW,
    PROMPT_HINT,
    AgentPane,
    CodexPane,
    GeminiPane,
    start_claude,
    start_codex,
    start_gemini,
)
from tests.support.tmux import Tmux

EDITABLE = str(Path(sys.executable).parent / "agentcomms")
CHECKOUT = Path(__file__).resolve().parent.parent
CONFIGS = (
    "none",
    "trivial",
    "agentcomms",
    "agentcomms-editable",
    "trivial-http",
    "agentcomms-http",
    "agentcomms-http-sync",
)
# What each agent can be measured with: Codex and Gemini CLI post nothing themselves, so there is
# no floor of a post without a process; only Codex runs a hook in the background (or not).
AGENT_CONFIGS: dict[AgentKind, tuple[str, ...]] = {
    "claude-code": CONFIGS[:6],
    "codex": ("none", "trivial", "agentcomms", "agentcomms-http-sync", "agentcomms-http"),
    "gemini": ("none", "trivial", "agentcomms", "agentcomms-http"),
}


def _user_install(root: Path) -> str:
    """This checkout installed the README's way into a fresh virtualenv; its `agentcomms`. The
    hook needs the standard library only, so the package goes in without its dependencies."""
    venv = root / "user-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(CHECKOUT)],
        check=True,
        capture_output=True,
    )
    return str(venv / "bin" / "agentcomms")


def _hooks(config: str, root: Path) -> tuple[str, ...] | None:
    """The agentcomms the hooks run in `config` (None: no hooks)."""
    if config == "none":
        return None
    if config == "agentcomms":
        return (_user_install(root),)
    if config in ("agentcomms-editable", "trivial-http") or config.startswith("agentcomms-http"):
        return (EDITABLE,)
    trivial = root / "bin" / "agentcomms"
    trivial.parent.mkdir(parents=True)
    trivial.write_text("#!/bin/sh\nexec cat > /dev/null\n")
    trivial.chmod(0o755)
    return (str(trivial),)


@dataclasses.dataclass(frozen=True)
class Door:
    """Where the reporting hooks post: the door's URL, the token (Claude Code's headers carry
    it), and its file (Codex's and Gemini CLI's shells read it)."""

    port: int
    token: str
    token_file: Path


async def _start(
    kind: AgentKind,
    config: str,
    argv: tuple[str, ...] | None,
    root: Path,
    socket_dir: Path,
    door: Door | None,
) -> tuple[AgentPane, Tmux]:
    def install(home: Path, project: Path) -> None:
        if argv is None:
            return
        target = Target(kind, home=home, project=project, argv=argv)
        if door is not None and kind == "claude-code":
            target = dataclasses.replace(
                target, hook_url=hook_url(door.port, kind), hook_token=door.token
            )
        elif door is not None:
            target = dataclasses.replace(
                target, hook_url=hook_url(door.port, kind), hook_token_file=door.token_file
            )
        changes = plan(target)
        if config.endswith("-sync"):
            _waited_for(changes)
        if config == "trivial" and kind == "gemini":
            _without_server(changes)
        changes.apply()

    tmux = Tmux(socket_dir / f"b-{uuid.uuid4().hex[:8]}")
    if kind == "codex":
        responses = FakeResponses()
        await responses.server.start()
        codex = await start_codex(
            tmux,
            root / "codex",
            responses,
            setup=install,
            until=PROMPT_HINT if argv is None else CODEX_HOOKS_REVIEW,
            settings={"approval_policy": "never"},
        )
        if argv is not None:
            await codex.answer(CODEX_HOOKS_REVIEW, "2", "Enter")  # "Trust all and continue"
            await codex.wait_for_screen(PROMPT_HINT)
        return codex, tmux
    if kind == "gemini":
        gemini = FakeGemini()
        await gemini.server.start()
        return await start_gemini(tmux, root / "gemini", gemini, setup=install), tmux
    model = FakeAnthropic()
    await model.server.start()
    return await start_claude(tmux, root / "claude", model, setup=install), tmux


def _waited_for(changes: Plan) -> None:
    """Codex's posted reports in the files `changes` writes made hooks Codex waits for (not
    ``"async"``), as it waits for those that decide."""
    for i, change in enumerate(changes.changes):
        if change.path.name != "hooks.json" or change.after is None:
            continue
        doc = json.loads(change.after)
        for groups in doc["hooks"].values():
            for handler in (h for g in groups for h in g["hooks"]):
                handler.pop("async", None)
        changes.changes[i] = dataclasses.replace(change, after=json.dumps(doc, indent=2))


def _without_server(changes: Plan) -> None:
    """Gemini CLI's settings without the MCP server: the trivial script is no MCP server, and
    Gemini holds every prompt until its servers are up."""
    for i, change in enumerate(changes.changes):
        if change.path.name == "settings.json" and change.after is not None:
            doc = json.loads(change.after)
            doc.pop("mcpServers", None)
            changes.changes[i] = dataclasses.replace(change, after=json.dumps(doc, indent=2))


def _steps(pane: AgentPane, round_no: int, calls: int) -> list[Any]:
    """`calls` tool calls the agent runs without asking anyone."""
    if isinstance(pane, CodexPane):
        return [codex_shell(f"echo bench-{round_no}-{i}") for i in range(calls)]
    if isinstance(pane, GeminiPane):
        # Each call its own pattern: Gemini CLI stops a turn that repeats one call (a loop).
        return [gemini_tool("glob", pattern=f"bench-{round_no}-{i}*") for i in range(calls)]
    return [bash(f"echo bench-{round_no}-{i}") for i in range(calls)]


async def _round(agent: AgentPane, round_no: int, calls: int) -> list[float]:
    """One prompt of `calls` tool calls; each call's milliseconds."""
    words = f"bench round {round_no}"
    model = agent.model  # type: ignore[attr-defined]
    model.on(words, *_steps(agent, round_no, calls), text(f"Round {round_no} done."))
    first = len(model.arrivals)
    await agent.type(words)
    await agent.wait_for_screen(f"Round {round_no} done.", timeout=300)
    await agent.wait_ready()
    arrivals = model.arrivals[first : first + calls + 1]
    if len(arrivals) != calls + 1:
        raise AssertionError(f"expected {calls + 1} requests, got {len(arrivals)}")
    return [(b - a) * 1000 for a, b in itertools.pairwise(arrivals)]


def _configs(kind: AgentKind) -> tuple[str, ...]:
    """The configurations this agentcomms can run: without a `hook` command (an agentcomms
    older than its hooks) a hook fails, and UserPromptSubmit's failure blocks every prompt."""
    done = subprocess.run([EDITABLE, "hook", "--help"], capture_output=True, check=False)
    if done.returncode != 0:
        print("this agentcomms has no `hook` command: measuring without it", file=sys.stderr)
        return AGENT_CONFIGS[kind][:2]
    return AGENT_CONFIGS[kind]


@contextlib.contextmanager
def _gateway(root: Path) -> Iterator[Door]:
    """A real `agentcomms up` of this checkout in a home of its own: its hook door's URL, and
    the token the hooks post with."""
    from tests.fakes.serve import free_port
    from tests.support.cli import env_for, start_up, stop, wait_for_line

    port = free_port()
    env = env_for(
        root / "home",
        AGENTCOMMS_TEMPORAL__ADDRESS=f"127.0.0.1:{free_port()}",
        AGENTCOMMS_TEMPORAL__UI_PORT=str(free_port()),
        AGENTCOMMS_SERVER__HOOK_PORT=str(port),
    )
    proc = start_up(env, "--headless")
    try:
        wait_for_line(proc, "Database", timeout=120)
        # What it prints later is read and dropped: a full pipe would stall its event loop.
        threading.Thread(target=lambda: proc.stdout and proc.stdout.read(), daemon=True).start()
        token_file = root / "home" / "hook.token"
        yield Door(port, token_file.read_text().strip(), token_file)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            stop(proc)


@contextlib.contextmanager
def _answering() -> Iterator[Door]:
    """A server that answers every post at once with 204, in a thread of its own."""
    import http.server

    class Answer(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Door(server.server_address[1], "floor", Path("/nonexistent"))
    finally:
        server.shutdown()
        server.server_close()


async def run(
    rounds: int, calls: int, wanted: tuple[str, ...] = CONFIGS, kind: AgentKind = "claude-code"
) -> dict[str, Any]:
    configs = tuple(c for c in _configs(kind) if c == "none" or c in wanted)
    times: dict[str, list[float]] = {c: [] for c in configs}
    with (
        tempfile.TemporaryDirectory(prefix="ach-", ignore_cleanup_errors=True) as tmp,
        contextlib.ExitStack() as doors,
    ):
        posting = any(c.startswith("agentcomms-http") for c in configs)
        door = doors.enter_context(_gateway(Path(tmp))) if posting else None
        floor = doors.enter_context(_answering()) if "trivial-http" in configs else None
        argvs = {c: _hooks(c, Path(tmp) / c) for c in configs}
        # A posted report starts no Python: only the `agentcomms hook` commands have a CPU to
        # measure this way.
        cpu = {
            c: _hook_cpu(argv, Path(tmp), kind)
            for c, argv in argvs.items()
            if argv is not None and "-http" not in c
        }
        doors_of = {"agentcomms-http": door, "agentcomms-http-sync": door, "trivial-http": floor}
        started = [
            await _start(kind, c, argvs[c], Path(tmp) / c, Path(tmp), doors_of.get(c))
            for c in configs
        ]
        try:
            await _round(started[0][0], 0, 2)  # warm the machine's caches up, not measured
            for round_no in range(1, rounds + 1):
                for config, (claude, _) in zip(configs, started, strict=True):
                    times[config] += await _round(claude, round_no, calls)
        finally:
            for agent, tmux in started:
                tmux.run("kill-server", check=False)
                await agent.model.server.stop()  # type: ignore[attr-defined]
    results = {c: summarize(t) for c, t in times.items()}
    base = results["none"]
    added = {
        c: {p: round(results[c][p] - base[p], 1) for p in ("p50", "p90", "p99")} for c in configs
    }
    return {
        "machine": machine(),
        "agent": kind,
        "rounds": rounds,
        "calls": calls,
        "results": results,
        "added": added,
        "hook_cpu": cpu,
    }


# What Claude Code passes a PostToolUse hook, short: the hook reads and trims it.
POST_TOOL_USE = (
    b'{"session_id":"s","hook_event_name":"PostToolUse","tool_name":"Bash",'
    b'"tool_input":{"command":"echo bench"},"tool_response":{"stdout":"bench"}}'
)


def _hook_cpu(
    argv: tuple[str, ...], root: Path, kind: AgentKind, runs: int = 30
) -> dict[str, float]:
    """The CPU (user + system) of one hook process, as each tool call starts two: it swings far
    less with the machine's load than the agent's wall time does. The gateway is down, so the
    hook starts, reads, finds no socket and exits, as every report-only hook does at most."""
    env = {
        "PATH": "/usr/bin:/bin",
        "AGENTCOMMS_SOCKET": str(root / "no-gateway.sock"),
        "TMUX": "/tmp/bench-tmux,1,0",
        "TMUX_PANE": "%1",
    }
    spent = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([*argv, "hook", kind], input=POST_TOOL_USE, env=env, capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        spent.append(used * 1000)
    return summarize(spent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--agent", choices=AGENT_KINDS, default="claude-code")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    report = asyncio.run(run(args.rounds, args.calls, tuple(args.configs), args.agent))
    m = report["machine"]
    lines = [
        f"# Hooks benchmark, {AGENT_NAMES[args.agent]}, {m['date']}",
        "",
        f"{m['cpus']} CPUs, Python {m['python']}, load average {m['load_average']} at start; "
        f"{AGENT_NAMES[args.agent]} per tool call, {args.rounds} rounds of {args.calls} calls "
        "per configuration.",
        "",
        "| hooks | p50 ms | p90 ms | p99 ms | mean ms | added p50 ms | added p90 ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for config in report["results"]:
        s, a = report["results"][config], report["added"][config]
        lines.append(
            f"| {config} | {s['p50']} | {s['p90']} | {s['p99']} | {s['mean']} | {a['p50']} "
            f"| {a['p90']} |"
        )
    lines += [
        "",
        "CPU of one hook process (user + system, the gateway down; two run around each tool call):",
        "",
        "| hooks | p50 ms | p95 ms |",
        "|---|---:|---:|",
    ]
    for config, spent in report["hook_cpu"].items():
        lines.append(f"| {config} | {spent['p50']} | {spent['p95']} |")
    markdown = "\n".join(lines) + "\n"
    print(markdown)
    if not args.no_save:
        name = "hooks" if args.agent == "claude-code" else f"hooks-{args.agent}"
        write_results(name, report, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
