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
