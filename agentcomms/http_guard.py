"""What every HTTP door of agentcomms checks before anything else: the Host and Origin a request
names, and how much body a caller may send before anyone knows who they are.

DNS rebinding: a web page the user visits can make its own name resolve to 127.0.0.1, and the
browser then talks to a loopback port as if it were the page's own server (``Host:
evil.example:8766``, answers readable by the page). A listener that answers only to its own
names (the address it is bound to, ``localhost``, the configured public URL's host) and refuses
a browser request from another origin closes that door; no request from a page carries
another site's Host. Providers name the public host (Twilio, Meta and Telegram post to
``server.public_url``), or the local one when a tunnel rewrites it: both are ours.

The body cap holds before the body is read: a declared ``Content-Length`` over it is refused at
once, and a body without one (chunked) is counted as it arrives and refused at the cap; the
server throws away what still comes. Any other answer given before the request's body was read
(a refusal) closes the connection.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# A provider's webhook is a few kilobytes (a chat message, a call's status); media come by URL.
MAX_WEBHOOK_BODY = 1_000_000
_WILDCARDS = {"", "0.0.0.0", "::"}
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CLOSE = {"Connection": "close"}
_CLOSE_RAW = (b"connection", b"close")


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` (``[v6]:port`` too) as a lowercase name and a port; None when malformed."""
    try:
        parts = urlsplit(f"//{value.strip()}")
        return (parts.hostname or "").lower(), parts.port
    except ValueError:
        return None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class Doorman:
    """The names a listener answers to, and the browser origins it serves.

    ``host``/``port`` are where it is bound: the host itself and ``localhost`` (and the loopback
    addresses) at that port are its names; bound to every address (``0.0.0.0``), any address of
    the machine and its host name are, at any port. ``public_url`` adds the host providers are
    told to post to, and ``names`` more names at that port (``server.allowed_hosts``).
    ``origins`` are other sites allowed to call it from a browser (the Temporal UI, for the
    codec server); otherwise a request that carries an ``Origin`` must come from the listener's
    own.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        public_url: str | None = None,
        names: Iterable[str] = (),
        origins: Iterable[str] = (),
    ) -> None:
        self.port = port
        self._bound = host.strip("[]").lower()
        self._names = {"localhost", "127.0.0.1", "::1", self._bound} - _WILDCARDS
        if self._bound in _WILDCARDS:
            # Not getfqdn(): a reverse lookup can hang for seconds offline. Other names of the
            # machine go in server.allowed_hosts.
            self._names.add(socket.gethostname().lower())
        self._public: set[tuple[str, int | None]] = set()
        if public_url:
            parts = urlsplit(public_url)
            if parts.hostname:
                name = parts.hostname.lower()
                port_given = parts.port or _DEFAULT_PORTS.get(parts.scheme)
                self._public |= {(name, None), (name, port_given)}
        # Names the operator added: a DNS alias of this machine, a proxy's upstream name.
        self._extra = {n.strip().lower() for n in names}
        self._origins = {o.rstrip("/").lower() for o in origins}

    def host_refusal(self, host: str | None) -> str | None:
        """Why a request naming ``host`` is not for this listener; None when it is."""
        if not host:
            return "forbidden: a Host header is required"
        split = _split_host(host)
        if split is not None:
            name, port = split
            if (name, port) in self._public:
                return None
            if (name in self._names or name in self._extra) and port == self.port:
                return None
            if name in self._extra and port is None:  # behind a proxy on the default port
                return None
            # Bound to every address (a container, behind a published port that may differ):
            # any address or name of this machine, at any port. A rebinding page's Host is its
            # own name, never one of these.
            if self._bound in _WILDCARDS and (name in self._names or _is_ip(name)):
                return None
        return (
            f"forbidden: Host {host[:100]!r} is not this server's name (a web page trying to "
            "reach it through DNS rebinding?)"
        )

    def origin_refusal(self, origin: str | None, host: str) -> str | None:
        """Why a browser request from ``origin`` is refused; None when it is the listener's own
        origin, an allowed one, or no browser's (no ``Origin``)."""
        if origin is None:
            return None
        given = origin.rstrip("/").lower()
        if given in self._origins:
            return None
        parts = urlsplit(given)
        if parts.scheme in _DEFAULT_PORTS and parts.netloc == host.strip().lower():
            return None
        return f"forbidden: requests from the web page at {origin[:100]!r} are not served here"

    def refusal(self, headers: Headers) -> str | None:
        host = headers.get("host")
        return self.host_refusal(host) or self.origin_refusal(headers.get("origin"), host or "")


class BodyTooLarge(HTTPException):
    """A request's body went past the door's cap (raised while it is read)."""

    def __init__(self, most: int) -> None:
        super().__init__(413, f"request body over {most:,} bytes refused")


class Guard:
    """ASGI middleware: the doorman's checks on every request, and the body cap (if any).

    Use as ``Middleware(Guard, doorman=…, max_body=…)`` in a Starlette app, so a cap reached
    while a route reads its body is answered 413 by the app's own exception handling."""

    def __init__(self, app: ASGIApp, *, doorman: Doorman, max_body: int | None = None) -> None:
        self.app = app
        self.doorman = doorman
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        why = self.doorman.refusal(headers)
        if why is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": why[:120]})
            else:
                await PlainTextResponse(why, 403, headers=_CLOSE)(scope, receive, send)
            return
        if scope["type"] == "http" and self.max_body is not None:
            await self._capped(scope, receive, send, headers, self.max_body)
            return
        await self.app(scope, receive, send)

    async def _capped(
        self, scope: Scope, receive: Receive, send: Send, headers: Headers, most: int
    ) -> None:
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await PlainTextResponse("bad Content-Length", 400, headers=_CLOSE)(
                    scope, receive, send
                )
                return
            if int(declared) > most:
                too_large = BodyTooLarge(most)
                await PlainTextResponse(too_large.detail, 413, headers=_CLOSE)(scope, receive, send)
                return
        seen = 0
        ended = declared == "0" or (declared is None and "transfer-encoding" not in headers)
        started = False

        async def counted() -> Message:
            nonlocal seen, ended
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > most:
                    # Kept open: closing on a body still arriving resets the connection, and
                    # the kernel drops the answer with it. The server throws the rest away.
                    ended = True
                    raise BodyTooLarge(most)
                ended = ended or not message.get("more_body", False)
            return message

        async def closing(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if not ended:  # answered before the body ended: do not read the rest
                    message = {**message, "headers": [*message.get("headers", []), _CLOSE_RAW]}
            await send(message)

        try:
            await self.app(scope, counted, closing)
        except BodyTooLarge as exc:  # an app without Starlette's handling of HTTPException
            if started:
                raise
            await PlainTextResponse(exc.detail, 413, headers=_CLOSE)(scope, receive, send)
