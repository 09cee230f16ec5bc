"""What agentcomms' hooks cost the agent: the time per tool call of the real Claude Code, with and
without the hooks `agentcomms install claude-code` writes, in the same run.

    .venv/bin/python -m bench.bench_hooks [--rounds 3] [--calls 20]

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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
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

from agentcomms.agents.install import Target, hook_url
from agentcomms.agents.install_agents import plan
from bench.common import machine, summarize, write_results
from tests.fakes.anthropic import FakeAnthropic, bash, text
from tests.support.agents import ClaudePane, start_claude
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
)


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
    if config in ("agentcomms-editable", "agentcomms-http", "trivial-http"):
        return (EDITABLE,)
    trivial = root / "bin" / "agentcomms"
    trivial.parent.mkdir(parents=True)
    trivial.write_text("#!/bin/sh\nexec cat > /dev/null\n")
    trivial.chmod(0o755)
    return (str(trivial),)


async def _start(
    argv: tuple[str, ...] | None, root: Path, socket_dir: Path, door: tuple[str, str] | None
) -> tuple[ClaudePane, Tmux]:
    url, token = door or (None, None)

    def install(home: Path, project: Path) -> None:
        if argv is not None:
            target = Target("claude-code", home=home, project=project, argv=argv)
            plan(dataclasses.replace(target, hook_url=url, hook_token=token)).apply()

    tmux = Tmux(socket_dir / f"b-{uuid.uuid4().hex[:8]}")
    model = FakeAnthropic()
    await model.server.start()
    return await start_claude(tmux, root / "claude", model, setup=install), tmux


async def _round(claude: ClaudePane, round_no: int, calls: int) -> list[float]:
    """One prompt of `calls` tool calls; each call's milliseconds."""
    words = f"bench round {round_no}"
    steps = [bash(f"echo bench-{round_no}-{i}") for i in range(calls)]
    claude.model.on(words, *steps, text(f"Round {round_no} done."))
    first = len(claude.model.arrivals)
    await claude.type(words)
    await claude.wait_for_screen(f"Round {round_no} done.", timeout=300)
    await claude.wait_ready()
    arrivals = claude.model.arrivals[first : first + calls + 1]
    if len(arrivals) != calls + 1:
        raise AssertionError(f"expected {calls + 1} requests, got {len(arrivals)}")
    return [(b - a) * 1000 for a, b in itertools.pairwise(arrivals)]


def _configs() -> tuple[str, ...]:
    """The configurations this agentcomms can run: without a `hook` command (an agentcomms
    older than its hooks) a hook fails, and UserPromptSubmit's failure blocks every prompt."""
    done = subprocess.run([EDITABLE, "hook", "--help"], capture_output=True, check=False)
    if done.returncode != 0:
        print("this agentcomms has no `hook` command: measuring without it", file=sys.stderr)
        return CONFIGS[:2]
    return CONFIGS


@contextlib.contextmanager
def _gateway(root: Path) -> Iterator[tuple[str, str]]:
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
        token = (root / "home" / "hook.token").read_text().strip()
        yield hook_url(port, "claude-code"), token
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            stop(proc)


@contextlib.contextmanager
def _answering() -> Iterator[tuple[str, str]]:
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
        yield hook_url(server.server_address[1], "claude-code"), "floor"
    finally:
        server.shutdown()
        server.server_close()


async def run(rounds: int, calls: int, wanted: tuple[str, ...] = CONFIGS) -> dict[str, Any]:
    configs = tuple(c for c in _configs() if c == "none" or c in wanted)
    times: dict[str, list[float]] = {c: [] for c in configs}
    with (
        tempfile.TemporaryDirectory(prefix="ach-", ignore_cleanup_errors=True) as tmp,
        contextlib.ExitStack() as doors,
    ):
        door = doors.enter_context(_gateway(Path(tmp))) if "agentcomms-http" in configs else None
        floor = doors.enter_context(_answering()) if "trivial-http" in configs else None
        argvs = {c: _hooks(c, Path(tmp) / c) for c in configs}
        # A posted report starts no process: only the command hooks have a CPU to measure.
        cpu = {
            c: _hook_cpu(argv, Path(tmp))
            for c, argv in argvs.items()
            if argv is not None and not c.endswith("-http")
        }
        started = [
            await _start(
                argvs[c],
                Path(tmp) / c,
                Path(tmp),
                {"agentcomms-http": door, "trivial-http": floor}.get(c),
            )
            for c in configs
        ]
        try:
            await _round(started[0][0], 0, 2)  # warm the machine's caches up, not measured
            for round_no in range(1, rounds + 1):
                for config, (claude, _) in zip(configs, started, strict=True):
                    times[config] += await _round(claude, round_no, calls)
        finally:
            for claude, tmux in started:
                tmux.run("kill-server", check=False)
                await claude.model.server.stop()
    results = {c: summarize(t) for c, t in times.items()}
    base = results["none"]
    added = {
        c: {
            "p50": round(results[c]["p50"] - base["p50"], 1),
            "p99": round(results[c]["p99"] - base["p99"], 1),
        }
        for c in configs
    }
    return {
        "machine": machine(),
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


def _hook_cpu(argv: tuple[str, ...], root: Path, runs: int = 30) -> dict[str, float]:
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
        subprocess.run(
            [*argv, "hook", "claude-code"], input=POST_TOOL_USE, env=env, capture_output=True
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        spent.append(used * 1000)
    return summarize(spent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    report = asyncio.run(run(args.rounds, args.calls, tuple(args.configs)))
    m = report["machine"]
    lines = [
        f"# Hooks benchmark, {m['date']}",
        "",
        f"{m['cpus']} CPUs, Python {m['python']}, load average {m['load_average']} at start; "
        f"Claude Code per tool call, {args.rounds} rounds of {args.calls} calls per configuration.",
        "",
        "| hooks | p50 ms | p99 ms | mean ms | added p50 ms | added p99 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for config in report["results"]:
        s, a = report["results"][config], report["added"][config]
        lines.append(
            f"| {config} | {s['p50']} | {s['p99']} | {s['mean']} | {a['p50']} | {a['p99']} |"
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
        write_results("hooks", report, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
