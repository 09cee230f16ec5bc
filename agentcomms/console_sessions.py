"""The console's sessions: what a browser's cookie holds instead of the console's token.

A browser sends a cookie of 127.0.0.1 to every port of 127.0.0.1, a dev server the agent runs
among them, so the cookie must be worth less than the token: a random value the gateway issued,
kept here (owner-only, beside the token) with the port and the deployment it was issued for and
its end. It opens only that console, until it ends or is revoked (`agentcomms console
--logout-all`, or a new token: each session is filed under a digest keyed by the token, so a
new token finds none of the old ones).

Standard library only at import, so the CLI revokes without loading the web stack. The file is
read again whenever it changed on disk, so a revocation by another process takes effect at the
gateway's next request.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agentcomms.config.home import agentcomms_home, write_private_file

SESSIONS_FILENAME = "console.sessions"
# A page left open for days, or a browser restarted under it, keeps its session; past this the
# printed address (`agentcomms console`) opens a new one.
SESSION_TTL_S = 30 * 24 * 3600


def sessions_path() -> Path:
    return agentcomms_home() / SESSIONS_FILENAME


@dataclass(frozen=True)
class Session:
    port: int
    deployment: str
    expires: float


class ConsoleSessions:
    """The sessions the consoles of this agentcomms home issued, kept in one private file."""

    def __init__(
        self,
        token: str,
        path: Path | None = None,
        *,
        clock: Callable[[], float] = time.time,
        ttl_s: float = SESSION_TTL_S,
    ) -> None:
        self._key = token.encode()
        self.path = path or sessions_path()
        self._clock = clock
        self._ttl_s = ttl_s
        self._seen: tuple[int, int, int] | None = None
        self._sessions: dict[str, Session] = {}

    def issue(self, *, port: int, deployment: str) -> str:
        """A new session for the console on ``port`` of ``deployment``: the cookie's value."""
        value = secrets.token_urlsafe(32)
        now = self._clock()
        with self._locked():
            kept = {
                digest: entry
                for digest, entry in _read(self.path).items()
                if (live := _session(entry)) is not None and live.expires > now
            }
            kept[self._digest(value)] = {
                "port": port,
                "deployment": deployment,
                "expires": now + self._ttl_s,
            }
            _write(self.path, kept)
        return value

    def valid(self, value: str | None, *, port: int, deployment: str) -> bool:
        """Whether ``value`` is a live session issued for this port of this deployment."""
        if not value:
            return False
        session = self._current().get(self._digest(value))
        return (
            session is not None
            and session.port == port
            and hmac.compare_digest(session.deployment, deployment)
            and session.expires > self._clock()
        )

    def _digest(self, value: str) -> str:
        # Filed under a digest keyed by the token: the file holds no cookie a reader could
        # replay, and a new token finds none of the old token's sessions.
        return hmac.new(self._key, value.encode(), hashlib.sha256).hexdigest()

    def _current(self) -> dict[str, Session]:
        """The sessions on disk, read again only when the file changed."""
        try:
            info = self.path.stat()
            seen: tuple[int, int, int] | None = (info.st_ino, info.st_mtime_ns, info.st_size)
        except FileNotFoundError:
            seen = None
        if seen != self._seen or seen is None:
            read = {digest: _session(e) for digest, e in _read(self.path).items()}
            self._sessions = {digest: s for digest, s in read.items() if s is not None}
            self._seen = seen
        return self._sessions

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with _lock(self.path):
            yield


def revoke_all(path: Path | None = None) -> int:
    """End every console session of this home (each browser must open the printed address
    again); how many were live."""
    path = path or sessions_path()
    now = time.time()
    with _lock(path):
        live = sum(s.expires > now for s in map(_session, _read(path).values()) if s)
        if path.exists():
            _write(path, {})
    return live


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """One writer at a time (the gateway issuing, the CLI revoking): a read, then a write, with
    nobody's revocation lost between them."""
    lock = path.with_name(f".{path.name}.lock")
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read(path: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        # A file nobody can read holds no session anyone may use: the browser opens a new one.
        return {}
    sessions = data.get("sessions") if isinstance(data, dict) else None
    return {k: v for k, v in (sessions or {}).items() if isinstance(v, dict)}


def _session(entry: dict[str, object]) -> Session | None:
    try:
        return Session(
            int(str(entry["port"])), str(entry["deployment"]), float(str(entry["expires"]))
        )
    except (KeyError, ValueError):
        return None


def _write(path: Path, sessions: dict[str, dict[str, object]]) -> None:
    write_private_file(path, json.dumps({"sessions": sessions}, indent=1), overwrite=True)
