"""Temporal's address: split it, tell whether it is local, see whether anything listens there.

Standard library only: `agentcomms status` asks this without loading the Temporal SDK.
"""

from __future__ import annotations

import socket

from agentcomms.errors import TemporalUnavailable

# Where `temporal.address` points when the config says nothing (the embedded dev server's port).
DEFAULT_ADDRESS = "127.0.0.1:7233"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"}

__all__ = ["DEFAULT_ADDRESS", "LOCAL_HOSTS", "is_local", "server_answers", "split_address"]


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise TemporalUnavailable(
            f"temporal.address {address!r} is not HOST:PORT (for example 127.0.0.1:7233)."
        )
    return host.strip("[]"), int(port)


def is_local(address: str) -> bool:
    host, _ = split_address(address)
    return host in LOCAL_HOSTS


def server_answers(address: str, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections at the address (cheap, no gRPC)."""
    host, port = split_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_problem(host: str, port: int) -> str | None:
    """Why a listener could not bind `host`:`port` (another program holds it, or the address is
    not this machine's), or None when it can. Checked before a server starts, so a port in use
    is one clear line and not the server's own exit (uvicorn ends the whole process)."""
    if port == 0:
        return None  # the system picks a free one
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return f"{host} is not an address of this machine ({exc.strerror or exc})"
    for family, kind, proto, _, where in infos:
        with socket.socket(family, kind, proto) as probe:
            # As the servers bind: a port left in TIME_WAIT by our own last run is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(where)
            except OSError as exc:
                return exc.strerror or str(exc)
    return None
