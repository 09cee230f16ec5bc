"""Delivery endpoints: typing text into, and interrupting, the place where an agent runs.

``adapter_for("tmux")`` returns the adapter for an endpoint kind; each kind is one module.
"""

from __future__ import annotations

from collections.abc import Callable

from agentcomms.bridge.base import Adapter
from agentcomms.bridge.checks import check_interrupt_key, check_socket, check_target
from agentcomms.bridge.look import PaneInfo
from agentcomms.bridge.sanitize import CleanText, sanitize
from agentcomms.bridge.tmux import TmuxAdapter
from agentcomms.errors import BridgeError, InvalidTarget, PaneNotFound, TmuxError

# A new endpoint kind (say a process's stdin) adds one entry here and one module beside tmux.py.
_ADAPTERS: dict[str, Callable[[], Adapter]] = {"tmux": TmuxAdapter}


_shared: dict[str, Adapter] = {}


def adapter_for(kind: str) -> Adapter:
    """The adapter for endpoint kind `kind` ("tmux"), one per process (it remembers what it
    learnt of the panes); InvalidTarget for an unknown kind."""
    if kind not in _shared:
        try:
            factory = _ADAPTERS[kind]
        except KeyError:
            known = ", ".join(sorted(_ADAPTERS))
            raise InvalidTarget(f"no adapter for endpoint kind {kind!r} (known: {known})") from None
        _shared[kind] = factory()
    return _shared[kind]


__all__ = [
    "Adapter",
    "BridgeError",
    "CleanText",
    "InvalidTarget",
    "PaneInfo",
    "PaneNotFound",
    "TmuxAdapter",
    "TmuxError",
    "adapter_for",
    "check_interrupt_key",
    "check_socket",
    "check_target",
    "sanitize",
]
