"""Who may use the console: whoever holds its token, then the session it opened.

The token is random, made at first use and kept owner-only in the agentcomms home
(``console.token``), like the codec server's. It arrives once in the address `up` prints
(``/?t=TOKEN``), opens a session (:mod:`agentcomms.console_sessions`) and leaves the address at
once (a redirect), so it is in no page, history entry, log or cookie. The cookie holds the
session's value, under a name that carries the console's port: a browser sends it to every
port of the host, and the session opens only the console it was issued by (its port, its
deployment), until it ends or is revoked. Every change is a POST carrying a form field derived
from the token (a page of another site can neither read nor guess it); the cookie's SameSite
and the Origin check of :mod:`agentcomms.http_guard` stop a cross-site POST before that.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from starlette.requests import Request

from agentcomms.console_sessions import ConsoleSessions
from agentcomms.console_token import console_token

__all__ = ["COOKIE", "CSRF_FIELD", "Access", "console_token"]

# The cookie's name before the port (``agentcomms_console_8235``).
COOKIE = "agentcomms_console"
CSRF_FIELD = "csrf"


def cookie_name(port: int) -> str:
    """The cookie of the console on ``port``: one console's cookie is not another's."""
    return f"{COOKIE}_{port}"


class Access:
    def __init__(self, token: str, *, deployment: str, sessions: Path | None = None) -> None:
        self._token = token.encode()
        self._deployment = deployment
        self._sessions = ConsoleSessions(token, sessions)
        # Known once the console listens (a port of 0 is the system's choice).
        self.port = 0
        # Derived, so a page may carry it: it opens nothing without the cookie, and the token
        # cannot be read back from it.
        self.csrf = hmac.new(self._token, b"console form", hashlib.sha256).hexdigest()[:32]

    @property
    def cookie(self) -> str:
        return cookie_name(self.port)

    @property
    def token(self) -> str:
        """What the printed address carries (never a cookie, a page or a log line)."""
        return self._token.decode()

    def matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self._token)

    def open_session(self) -> str:
        """A new session of this console: the value its cookie holds."""
        return self._sessions.issue(port=self.port, deployment=self._deployment)

    def admitted(self, request: Request) -> bool:
        return self._sessions.valid(
            request.cookies.get(self.cookie), port=self.port, deployment=self._deployment
        )

    def form_is_ours(self, given: object) -> bool:
        return isinstance(given, str) and hmac.compare_digest(given.encode(), self.csrf.encode())
