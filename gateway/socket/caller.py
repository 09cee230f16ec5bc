"""Who is at the other end of a request: the agent it says it acts for (the MCP server names the
agent its bearer token belongs to) and the process the kernel says connected (the socket's peer
credentials, which no request can change)."""

from __future__ import annotations

import contextlib
import pwd
import socket
import struct
from dataclasses import dataclass

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class Peer:
    """The process that opened the connection, as the kernel recorded it at connect time."""

    pid: int
    uid: int
    gid: int

    @classmethod
    def of(cls, sock: socket.socket | None) -> Peer | None:
        """The peer of a Unix socket (None where the system does not say: not Linux)."""
        option = getattr(socket, "SO_PEERCRED", None)
        if sock is None or option is None:
            return None
        try:
            pid, uid, gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, option, _UCRED.size))
        except OSError:
            return None
        return cls(pid, uid, gid)

    @property
    def user(self) -> str:
        try:
            return pwd.getpwuid(self.uid).pw_name
        except KeyError:
            return f"uid {self.uid}"

    def alive(self) -> bool:
        """Whether the process is still there to be looked at (not gone, not a zombie)."""
        try:
            return ProcStat.read(self.pid).state not in ("Z", "X")
        except (OSError, ValueError):
            return False

    def terminal(self) -> str | None:
        """The process's controlling terminal, e.g. /dev/pts/3 (None: it has none, or it is
        gone)."""
        with contextlib.suppress(OSError, ValueError):
            return terminal_name(ProcStat.read(self.pid).tty_nr)
        return None

    def said(self) -> str:
        """Who answered, as records say it: the user, and the terminal where there is one."""
        terminal = self.terminal()
        return f"{self.user} on {terminal}" if terminal else self.user


@dataclass(frozen=True)
class Caller:
    """Who a request comes from. ``agent``: the agent the request acts for, by its token (None:
    the human's request). ``peer``: the connecting process (None: one of the gateway's own
    surfaces, such as the console, that calls a method in-process)."""

    agent: str | None = None
    peer: Peer | None = None
    # Came through the hooks' own door, which other users' agents may open.
    hooks_door: bool = False


# The console calls methods in-process, for the human it admitted with its token.
THE_CONSOLE = Caller()


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/PID/stat that say where a process runs."""

    state: str  # R, S, D…; Z: a zombie, whose environment is gone
    ppid: int
    tty_nr: int
    session: int = 0  # the session's leader: a process started in a session of its own leads it
    started: int = 0  # clock ticks after boot: with the pid, names one process (pids are reused)

    @classmethod
    def read(cls, pid: int) -> ProcStat:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
        # The command name may hold spaces and parentheses: the fields start after the last ")".
        fields = data[data.rindex(")") + 2 :].split()
        return cls(
            state=fields[0],
            ppid=int(fields[1]),
            tty_nr=int(fields[4]),
            session=int(fields[3]),
            started=int(fields[19]),
        )


def tty_device(tty_nr: int) -> tuple[int, int]:
    """The (major, minor) of a /proc stat tty_nr."""
    return (tty_nr >> 8) & 0xFFF, (tty_nr & 0xFF) | ((tty_nr >> 12) & 0xFFF00)


def terminal_name(tty_nr: int) -> str | None:
    if tty_nr == 0:
        return None
    major, minor = tty_device(tty_nr)
    if 136 <= major <= 143:  # Unix98 pseudo-terminals, 256 to a major
        return f"/dev/pts/{(major - 136) * 256 + minor}"
    return f"/dev/tty{minor}" if major == 4 else f"terminal {major}:{minor}"


def environ(pid: int) -> dict[str, str]:
    """The process's environment as it started (empty when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    pairs = (entry.partition(b"=") for entry in raw.split(b"\0") if entry)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def ancestors(pid: int, *, limit: int = 200) -> list[int]:
    """The process's parents, nearest first, up to the first process (or one that is gone)."""
    found = []
    for _ in range(limit):
        try:
            pid = ProcStat.read(pid).ppid
        except (OSError, ValueError):
            break
        if pid <= 0:
            break
        found.append(pid)
    return found
