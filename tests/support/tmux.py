"""A private tmux server per test, and the panes tests type into.

A recorder pane runs ``stty raw -echo; exec cat >> FILE``: the file holds exactly the bytes
typed into the pane (CR for Enter, 0x03 for C-c…), so assertions are on bytes, not on a
rendering of them.
"""

from __future__ import annotations

import asyncio
import getpass
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentcomms.models import PaneTarget

# What `agentcomms send` puts before its text in the pane: the gateway names its user.
SENT_HEADER = f"[cli:local from {getpass.getuser()}] "


def as_sent(*texts: str) -> bytes:
    """What a recorder pane holds once `agentcomms send` typed each of `texts`, in order: each
    behind its header, every line after its first behind the gutter, then Enter."""
    return b"".join(f"{SENT_HEADER}{_guttered(text)}\r".encode() for text in texts)


def _guttered(text: str) -> str:
    first, *rest = text.split("\n")
    return "\n".join([first, *(f"| {line}" if line else "|" for line in rest)])


class Tmux:
    """A private tmux server on a socket in a temporary directory."""

    def __init__(self, socket: Path) -> None:
        self.socket = str(socket)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-S", self.socket, *args], capture_output=True, text=True, check=check
        )

    def new_session(
        self, name: str, command: str | None = None, *, folder: Path | None = None
    ) -> str:
        """Start a detached session (`sh`, or `command`), working in `folder` if given; return
        its first pane's target.

        Plain `sh`, not the login shell: a user's rc files (pyenv rehash locks, prompts) make
        start-up slow or hang, and tests must not depend on them.
        """
        where = ["-c", str(folder)] if folder is not None else []
        self.run("new-session", "-d", "-s", name, "-x", "200", "-y", "50", *where, command or "sh")
        return f"{name}:0.0"

    def capture(self, target: str) -> str:
        """The pane's visible text, joined lines, trailing blanks trimmed."""
        out = self.run("capture-pane", "-p", "-J", "-t", target).stdout
        return out.rstrip("\n")

    def kill_session(self, name: str) -> None:
        self.run("kill-session", "-t", name, check=False)


class Terminal:
    """A person's terminal attached to a session of `tmux`: a tmux client in a pane of a second
    server. Keys pressed here reach the session's pane as a human's do, through that client, and
    tmux stamps the session's activity with each (``send-keys`` stamps nothing: the mailbox
    trusts an input box it read empty until that stamp moves)."""

    def __init__(self, tmux: Tmux, session: str) -> None:
        self.inner, self.session = tmux, session
        self.outer = Tmux(Path(f"{tmux.socket}-terminal-{uuid.uuid4().hex[:6]}"))
        attach = f"env -u TMUX TERM=screen tmux -S {shlex.quote(tmux.socket)} attach -t {session}"
        # One row more than the session's panes: the attached session's status line takes it.
        self.outer.run(
            "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "200", "-y", "51", attach
        )  # fmt: skip

    def attached(self) -> bool:
        shown = self.inner.run("display-message", "-p", "-t", self.session, "#{session_attached}")
        return shown.stdout.strip() not in ("", "0")

    def keys(self, *keys: str) -> None:
        """Press keys by tmux's names (``-l`` first: the words as typed)."""
        self.outer.run("send-keys", "-t", "t:0.0", *keys)

    def close(self) -> None:
        self.outer.run("kill-server", check=False)


@pytest.fixture(scope="session")
def tmux_socket_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed: `apt-get install tmux` (the tests need a real tmux)")
    return tmp_path_factory.mktemp("tmux")


@pytest.fixture
def tmux(tmux_socket_dir: Path) -> Iterator[Tmux]:
    """A fresh private tmux server per test; killed afterwards."""
    server = Tmux(tmux_socket_dir / f"t-{uuid.uuid4().hex[:8]}")
    yield server
    server.run("kill-server", check=False)


def pane_command(tmux: Tmux, target: str) -> str:
    """The program in the pane's foreground, as tmux names it (`sh`, `cat`…)."""
    return tmux.run("display-message", "-p", "-t", target, "#{pane_current_command}").stdout.strip()


def recorder(
    tmux: Tmux, tmp_path: Path, name: str, *, folder: Path | None = None
) -> tuple[str, Path]:
    """A recorder pane in session `name` (raw mode: Enter arrives as CR), working in `folder`
    if given (an agent's project, where its files go): its target, and the file its bytes land
    in. It returns at once, before the shell became cat."""
    out = tmp_path / f"{name}.bytes"
    out.touch()
    target = tmux.new_session(name, f"stty raw -echo; exec cat >> {out}", folder=folder)
    return target, out


@dataclass
class Recorder:
    """A recorder pane already listening: its target, and the file its bytes land in."""

    pane: PaneTarget
    path: Path

    def read(self) -> bytes:
        return self.path.read_bytes()

    async def wait_for(self, expected: bytes, *, within: float = 10.0) -> bytes:
        """Poll until the file holds exactly `expected`; return what it holds at the end."""
        for _ in range(int(within / 0.01)):
            if self.read() == expected:
                break
            await asyncio.sleep(0.01)
        return self.read()

    async def settled(self, quiet: float = 0.3) -> bytes:
        """The file's content after a quiet spell, so a late duplicate would show up."""
        await asyncio.sleep(quiet)
        return self.read()


async def wait_for_command(tmux: Tmux, target: str, command: str, *, present: bool = True) -> None:
    """Wait until the pane's foreground program is (or, with present=False, is no longer) `command`."""
    for _ in range(500):
        if (pane_command(tmux, target) == command) == present:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"pane {target} never {'ran' if present else 'left'} {command!r}")


async def start_recorder(
    tmux: Tmux, path: Path, *, name: str = "rec", bracketed: bool = False, screen: str = ""
) -> Recorder:
    """A recorder pane writing to `path`, returned once raw mode is on (the shell became cat);
    with `screen`, the pane shows it first (a dialog, a running turn) as an agent would."""
    path.touch()  # noqa: ASYNC240  (a test's own temporary file; instant)
    # A program that turned bracketed paste on gets pastes wrapped in ESC[200~ … ESC[201~.
    enable = r"printf '\033[?2004h'; " if bracketed else ""
    if screen:
        # The shell's own printf, not `cat FILE`: the wait below takes the first `cat` it sees
        # for the recorder, and one showing the screen came before raw mode (Enter read as LF).
        enable += f"printf '%s\\n' {shlex.quote(screen)}; "
    target = tmux.new_session(name, f"{enable}stty raw -echo; exec cat >> {shlex.quote(str(path))}")
    await wait_for_command(tmux, target, "cat")  # raw mode is on once the shell became cat
    return Recorder(PaneTarget(target=target, socket=tmux.socket), path)


@pytest.fixture(name="recorder")
async def listening_recorder(tmux: Tmux, tmp_path: Path) -> Recorder:
    """A recorder pane already listening, for the tests of typing itself (the bridge, the
    delivery activity). Tests of a whole stack call ``recorder()`` for panes they name."""
    return await start_recorder(tmux, tmp_path / "typed.bin")
