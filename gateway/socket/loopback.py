"""Who is at the other end of a loopback TCP connection, as the kernel says it: the Unix user
that owns the connecting socket (``/proc/net/tcp``, ``tcp6``) and the processes holding it (the
``socket:[INODE]`` links in ``/proc/PID/fd``). A TCP connection has no peer credentials as a
Unix socket has; on the same machine these tables say the same, and no request can change them.

A cookie or token a browser sends can be replayed by any process of the same user; the process
that holds the connection cannot be.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import sys
from dataclasses import dataclass

_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
Address = tuple[str, int]


@dataclass(frozen=True)
class LoopbackSocket:
    """The connecting side's socket: its owner and its inode."""

    uid: int
    inode: int


def loopback_socket(client: Address, server: Address) -> LoopbackSocket | None:
    """The socket of the connection from ``client`` to ``server`` (as the server sees them);
    None when the kernel's tables hold no such connection (it is not local, or it closed)."""
    found = _socket_of(_ip_port(client), _ip_port(server))
    return LoopbackSocket(*found) if found is not None else None


def holders(inode: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The processes whose open files include socket ``inode``, and those this process may not
    look into (another user's, or one that made itself undumpable). It reads every process's
    open files: tens of milliseconds, so it is asked only when some agent's pane is there."""
    link = f"socket:[{inode}]"
    pids, hidden = [], []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except PermissionError:
            hidden.append(int(name))
            continue
        except OSError:
            continue  # gone meanwhile
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{name}/fd/{fd}") == link:
                    pids.append(int(name))
                    break
    return tuple(pids), tuple(hidden)


def _ip_port(address: Address) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    ip = ipaddress.ip_address(address[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, address[1]
    return ip, address[1]


def _socket_of(
    local: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int],
    remote: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int],
) -> tuple[int, int] | None:
    """(uid, inode) of the socket whose own end is ``local`` and whose other end is ``remote``."""
    for table in _TABLES:
        try:
            with open(table, encoding="ascii") as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            if _parsed(fields[1]) == local and _parsed(fields[2]) == remote:
                return int(fields[7]), int(fields[9])
    return None


def _parsed(field: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int] | None:
    """An address as the tables write it: each 32-bit word in hex, in the host's byte order."""
    host, _, port = field.partition(":")
    try:
        packed = b"".join(
            int(host[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(host), 8)
        )
        ip = ipaddress.ip_address(packed)
        number = int(port, 16)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, number
    return ip, number
