"""What the tmux bridge may hand to tmux: a target, a socket path, an event id and an interrupt
key, each checked before any tmux client runs, so untrusted input can never spell a tmux
command, a key name or a format. The config file and the gateway use the same checks
(:mod:`agentcomms.bridge.fields`), so a bad value is refused when it is given.
"""

from __future__ import annotations

import os
import re
import socket as sockets
from pathlib import Path

from agentcomms.errors import InvalidTarget
from agentcomms.models import PaneTarget

# Keys an agent may be interrupted with. Anything else could be a sequence of tmux key names.
INTERRUPT_KEY = re.compile(r"C-[a-z]|M-[a-z]|Escape|Enter|Tab|F(?:[1-9]|1[0-2])")
_EVENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_pane(pane: PaneTarget) -> None:
    check_target(pane.target)
    if pane.socket is not None:
        check_socket(pane.socket)


def check_target(target: str) -> None:
    """Raise InvalidTarget unless `target` can be handed to tmux as one -t argument."""
    if not target.strip() or len(target) > 256 or _CONTROL.search(target):
        raise InvalidTarget(
            f"not a usable tmux target: {target!r} (expected session:window.pane, e.g. dev:0.1)"
        )
    if target.endswith(";"):  # tmux would read it as a command separator
        raise InvalidTarget(f"a tmux target cannot end with ';': {target!r}")


def check_socket(socket: str) -> None:
    """Raise InvalidTarget unless `socket` can be handed to tmux as its -S path."""
    if not socket or _CONTROL.search(socket):
        raise InvalidTarget(f"not a usable tmux socket path: {socket!r}")


def socket_path(given: str, environ: dict[str, str] | None = None) -> str:
    """The socket of the tmux server `given` names: a bare name as ``tmux -L NAME`` means it
    (``${TMUX_TMPDIR:-/tmp}/tmux-UID/NAME``), anything with a ``/`` as ``tmux -S PATH`` (made
    absolute: the worker that types runs in another directory)."""
    check_socket(given)
    if "/" not in given:
        env = os.environ if environ is None else environ
        base = env.get("TMUX_TMPDIR") or "/tmp"
        return str(Path(base) / f"tmux-{os.getuid()}" / given)
    return str(Path(given).expanduser().absolute())


def no_server_at(path: str) -> bool:
    """Whether no tmux server listens at socket `path` (none there, or one that ended left its
    socket). One of another user's, which this process may not reach, is not known to be gone."""
    with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            return True
        except OSError:
            return False
    return False


def server_named(given: str | None, path: str | None) -> str:
    """The tmux server a person named, in their words and tmux's: for errors."""
    if given is not None and path is not None and given != path:
        return f"the tmux server {given!r} (`tmux -L {given}`, socket {path})"
    if path is not None:
        return f"the tmux server at {path}"
    return "the default tmux server"


def check_event_id(event_id: str) -> None:
    """Raise InvalidTarget unless `event_id` can be recorded in a pane option."""
    if not is_event_id(event_id):
        raise InvalidTarget(
            f"event id {event_id!r} must be 1-200 letters, digits, '_', '.', ':' or '-'"
        )


def is_event_id(text: str) -> bool:
    """Whether `text` may stand in a tmux format as an event id."""
    # It goes into a pane option through a tmux format and is compared on retry, so it must hold
    # nothing tmux expands ('#') and nothing that separates entries (spaces).
    return _EVENT_ID.fullmatch(text) is not None


def check_interrupt_key(key: str) -> None:
    """Raise InvalidTarget unless `key` is one tmux key an agent may be interrupted with."""
    if not INTERRUPT_KEY.fullmatch(key):
        raise InvalidTarget(
            f"interrupt key {key!r} is not allowed; use C-a … C-z, M-a … M-z, Escape, Enter, "
            "Tab or F1 … F12"
        )
