"""Who may use the console: whoever holds its token.

The token is random, made at first use and kept owner-only in the agentcomms home
(``console.token``), like the codec server's. It arrives once in the address `up` prints
(``/?t=TOKEN``), becomes an HttpOnly, SameSite=Strict cookie, and leaves the address at once (a
redirect), so it is in no page, history entry or log. Every change is a POST carrying a form
field derived from the token (a page of another site can neither read nor guess it); the
cookie's SameSite and the Origin check of :mod:`agentcomms.http_guard` stop a cross-site POST
before that.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.requests import Request

from agentcomms.console_token import console_token

__all__ = ["COOKIE", "CSRF_FIELD", "Access", "console_token"]

COOKIE = "agentcomms_console"
CSRF_FIELD = "csrf"


class Access:
    def __init__(self, token: str) -> None:
        self._token = token.encode()
        # Derived, so a page may carry it: it opens nothing without the cookie, and the token
        # cannot be read back from it.
        self.csrf = hmac.new(self._token, b"console form", hashlib.sha256).hexdigest()[:32]

    def matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self._token)

    def admitted(self, request: Request) -> bool:
        return self.matches(request.cookies.get(COOKIE))

    def cookie_value(self) -> str:
        return self._token.decode()

    def form_is_ours(self, given: object) -> bool:
        return isinstance(given, str) and hmac.compare_digest(given.encode(), self.csrf.encode())
