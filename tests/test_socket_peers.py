"""Whether a process belongs to an agent's pane, rule by rule, with real processes: it descends
from the pane's process, runs on the pane's terminal, or carries the pane's TMUX_PANE on the same
tmux server. Which panes are agents': a registration counts from the moment the gateway accepts
it, and what cannot be told is refused, not guessed. And the peer credentials the socket reads
are the connecting process's own."""

from __future__ import annotations

import fcntl
import os
import socket
import sqlite3
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentcomms.errors import PanesUnknown
from agentcomms.models import Registration
from agentcomms.store import Store
from gateway.socket.caller import Peer, terminal_name
from gateway.socket.loopback import holders, loopback_socket
from gateway.socket.panes import AgentPane, AgentPanes, holding
from tests.support.tmux import Tmux


@contextmanager
def _started(args: list[str], **options: object) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(args, **options)  # type: ignore[call-overload]
    try:
        # Read once it runs its own program: what it is before that is its parent's copy.
        deadline = time.monotonic() + 10
        while Path(f"/proc/{proc.pid}/comm").read_text().strip() != Path(args[0]).name:
            assert time.monotonic() < deadline, f"{args[0]} never started"
            time.sleep(0.01)
        yield proc
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _pane(
    pid: int = 9_999_999, tty: str = "/dev/null-tty", server: str = "", pane_id: str = "%7"
) -> AgentPane:
    return AgentPane("backend", pane_id, pid, tty, server)


def test_a_process_descending_from_the_panes_process_is_in_the_pane() -> None:
    with _started(["sh", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE) as shell:
        assert shell.stdout is not None
        child = int(shell.stdout.readline())
        found = holding(child, [_pane(pid=9_999_999), _pane(pid=shell.pid)])
        assert found is not None and found.pane.pid == shell.pid
        assert "descends from the pane's process" in found.how
        assert holding(os.getpid(), [_pane(pid=shell.pid)]) is None


def test_a_process_on_the_panes_terminal_is_in_the_pane() -> None:
    leader, follower = os.openpty()
    tty = os.ttyname(follower)

    def take_terminal() -> None:  # as a shell in a pane has it: its controlling terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        with _started(
            ["sleep", "30"], stdin=follower, start_new_session=True, preexec_fn=take_terminal
        ) as on_it:
            found = holding(on_it.pid, [_pane(tty="/dev/pts/9999"), _pane(tty=tty)])
            assert found is not None and f"on the pane's terminal {tty}" in found.how
            assert Peer(on_it.pid, os.getuid(), os.getgid()).terminal() == tty
    finally:
        os.close(leader)
        os.close(follower)


def test_a_process_carrying_the_panes_tmux_pane_on_its_server_is_in_the_pane(
    tmp_path: Path,
) -> None:
    server, other = tmp_path / "server", tmp_path / "other"
    server.touch()
    other.touch()
    env = {"PATH": os.environ["PATH"], "TMUX_PANE": "%7", "TMUX": f"{server},123,0"}
    with _started(["sleep", "30"], env=env, start_new_session=True) as carrying:
        found = holding(carrying.pid, [_pane(server=str(server))])
        assert found is not None and "carries the pane's TMUX_PANE=%7" in found.how
        # The same pane id on another tmux server (the human's own) is another pane.
        assert holding(carrying.pid, [_pane(server=str(other))]) is None
        assert holding(carrying.pid, [_pane(server=str(server), pane_id="%8")]) is None


def test_the_peer_is_the_connecting_process(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(path)
        listening.listen()
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)
            accepted, _ = listening.accept()
            with accepted:
                assert Peer.of(accepted) == Peer(os.getpid(), os.getuid(), os.getgid())


def test_terminal_names() -> None:
    assert terminal_name(0) is None
    assert terminal_name((136 << 8) | 3) == "/dev/pts/3"
    assert terminal_name((137 << 8) | 4) == "/dev/pts/260"
    assert terminal_name((4 << 8) | 1) == "/dev/tty1"


async def test_a_pane_is_an_agents_from_the_moment_its_registration_is_accepted(
    tmux: Tmux, tmp_path: Path
) -> None:
    target = tmux.new_session("agent")
    pane_pid = int(tmux.run("display-message", "-p", "-t", target, "#{pane_pid}").stdout)
    # The projection has not heard of the registration yet (its mailbox has not run it).
    async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}") as store:
        panes = AgentPanes(store, "this-host")
        assert holding(pane_pid, await panes.panes()) is None
        # A pane on another host is not one of this host's, whatever its target is here.
        panes.accepted("remote", Registration(target=target, socket=tmux.socket, host="other"))
        assert holding(pane_pid, await panes.panes()) is None

        panes.accepted("backend", Registration(target=target, socket=tmux.socket, host="this-host"))
        found = holding(pane_pid, await panes.panes())
        assert found is not None and found.pane.agent_id == "backend"

        # Registered again elsewhere: the pane it left is nobody's now.
        panes.accepted("backend", Registration(target="gone:0.0", socket=tmux.socket, host="x"))
        assert holding(pane_pid, await panes.panes()) is None


async def test_whose_pane_a_process_runs_in_is_refused_not_guessed_when_it_cannot_be_told(
    tmux: Tmux, tmp_path: Path
) -> None:
    db = tmp_path / "p.db"
    async with await Store.open(f"sqlite+aiosqlite:///{db}") as store:
        panes = AgentPanes(store, "this-host")
        # A tmux server that is not there: nothing runs in its panes, so nothing is unknown.
        gone = str(tmp_path / "no-server")
        panes.accepted("gone", Registration(target="a:0.0", socket=gone, host="this-host"))
        assert holding(os.getpid(), await panes.panes()) is None
        # A projection that cannot be read: unknown.
        with sqlite3.connect(db) as raw:
            raw.execute("DROP TABLE agents")
        with pytest.raises(PanesUnknown, match="projection cannot be read"):
            holding(os.getpid(), await panes.panes())


@pytest.mark.parametrize("family, host", [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
def test_a_loopback_connection_names_the_user_and_processes_holding_it(
    family: socket.AddressFamily, host: str
) -> None:
    with socket.socket(family) as listening:
        try:
            listening.bind((host, 0))
        except OSError:
            pytest.skip(f"no {host} on this machine")
        listening.listen()
        server = listening.getsockname()[:2]
        connect = (
            f"import socket, sys, time; s = socket.create_connection({server!r}); time.sleep(30)"
        )
        with _started([sys.executable, "-c", connect]) as other:
            accepted, client = listening.accept()
            with accepted:
                peer = loopback_socket(client[:2], server)
                assert peer is not None and peer.uid == os.getuid()
                assert holders(peer.inode)[0] == (other.pid,)
        # Its own end, from this side, is this process's; a connection that is not there, none.
        with socket.create_connection(server) as mine:
            accepted, client = listening.accept()
            with accepted:
                ours = loopback_socket(mine.getsockname()[:2], server)
                assert ours is not None and holders(ours.inode)[0] == (os.getpid(),)
        assert loopback_socket((host, 1), server) is None
