"""The gateway's webhook server as a stranger finds it: every route its app mounts, each method
each accepts, and what a stranger sends there without a provider's secret.

The doors come from the running app (``Gateway.http.app.routes``), not from a list kept by hand:
a route the doors test does not know how to attack fails it, so none is added unchecked.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from agentcomms.http_guard import MAX_WEBHOOK_BODY
from tests.support.raw_http import Answer, knock

FIFTY_MB = 50_000_000
ADD_IT = "add this door to the doors test (tests/test_webhook_doors.py: DOORS), with its attacks"

# How a provider proves a request is its own, at a door:
# - twilio: X-Twilio-Signature over server.public_url + path + query and the form;
# - telegram: the secret token header, as set with setWebhook;
# - meta: X-Hub-Signature-256, the app secret's HMAC of the body;
# - meta-verify: the subscription handshake's hub.verify_token, in the query;
# - media: our own short-lived signature of an audio URL (exp, sig), Twilio fetches it;
# - slack: X-Slack-Signature, the signing secret's HMAC of X-Slack-Request-Timestamp and the body.
# - push: our own one-time token in the path, signed for one approval's answer (ntfy's button).
Signing = Literal["twilio", "telegram", "meta", "meta-verify", "media", "slack", "push"]
SIGNATURE_HEADERS: dict[Signing, str] = {
    "twilio": "X-Twilio-Signature",
    "telegram": "X-Telegram-Bot-Api-Secret-Token",
    "meta": "X-Hub-Signature-256",
    "slack": "X-Slack-Signature",
}
CONTENT_TYPES: dict[Signing, str] = {
    "twilio": "application/x-www-form-urlencoded",
    "telegram": "application/json",
    "meta": "application/json",
    "slack": "application/json",
}


@dataclass(frozen=True)
class Door:
    """One method of one route, as the app declares it (its path a template: ``{call_id}``)."""

    method: str
    route: str
    signing: Signing

    @property
    def header(self) -> str | None:
        return SIGNATURE_HEADERS.get(self.signing)

    @property
    def reads_body(self) -> bool:
        """Whether the door reads a body (then a signature header is checked before it is)."""
        return self.signing in CONTENT_TYPES


def mounted(app: Starlette) -> list[tuple[str, Route]]:
    """Every (method, route) the webhook app serves. Anything but a plain route with its
    methods named (a mount, a websocket, a route taking any method) fails: the test cannot say
    what it serves."""
    found: list[tuple[str, Route]] = []
    for route in app.routes:
        if not isinstance(route, Route) or route.methods is None:
            pytest.fail(f"{route!r} is served by the webhook app: {ADD_IT}")
        found += [(method, route) for method in sorted(route.methods)]
    return found


def known_doors(
    app: Starlette, doors: list[Door], public: dict[tuple[str, str], str]
) -> list[tuple[Door, Route]]:
    """The app's routes, each with the door the test attacks it as; a route neither in `doors`
    nor deliberately `public` fails the test, by name."""
    by_key = {(d.method, d.route): d for d in doors}
    unknown, known = [], []
    for method, route in mounted(app):
        # Starlette serves HEAD wherever it serves GET: the same door, without the body.
        door = by_key.get((method, route.path)) or by_key.get(("GET", route.path))
        if door is not None and method == "HEAD":
            door = Door("HEAD", door.route, door.signing)
        if door is not None:
            known.append((door, route))
        elif (method, route.path) not in public:
            unknown.append(f"{method} {route.path}")
    if unknown:
        pytest.fail(f"the webhook server serves {', '.join(unknown)}: {ADD_IT}")
    return known


def concrete(route: Route, params: dict[str, str]) -> str:
    """The route's path with each of its parameters given a value; a parameter the test has no
    value for fails it."""
    missing = set(route.param_convertors) - set(params)
    if missing:
        pytest.fail(
            f"{route.path} takes {sorted(missing)}, which the test has no value for: {ADD_IT}"
        )
    path = route.path
    for name in route.param_convertors:
        path = path.replace(f"{{{name}}}", params[name])
    return path


def database_rows(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table of the projection (read back as it is on disk)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: sorted(conn.execute(f'SELECT * FROM "{t}"'), key=repr) for t in tables}


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


def _endless_body() -> Iterator[bytes]:
    """A chunked body that would go on for 50 MB; a door that reads it whole never answers."""
    for _ in range(FIFTY_MB // 65_536):
        yield b"x" * 65_536


async def guarded_refusals(
    port: int, door: Door, path: str, present: dict[str, str], *, rightful: str | None = None
) -> None:
    """What the gateway's guard refuses at every door before it is reached: another site's Host
    or Origin (a rebinding web page), and a 50 MB body, declared or chunked without end.
    `present` is a signature header as the door wants it (right or not: the door would read the
    body); `rightful` the path with a signed query, for a door signed so (served to its Host)."""
    local = f"127.0.0.1:{port}"
    for headers, why in (
        ({"Host": f"evil.example:{port}"}, "is not this server's name"),
        ({"Host": "evil.example"}, "is not this server's name"),
        ({"Host": local, "Origin": "http://evil.example"}, "are not served here"),
        ({"Host": local, "Origin": "null"}, "are not served here"),
    ):
        answer = await knock(
            port, rightful or path, present | headers, body=b"{}", method=door.method
        )
        assert answer.status == 403, (door, headers, answer)
        assert door.method == "HEAD" or why in answer.text, (door, headers, answer)

    # 50 MB declared, a few bytes sent: refused at once, nothing more is waited for.
    declared = await knock(
        port,
        path,
        {"Host": local, "Content-Length": str(FIFTY_MB)} | present,
        body=b"abc",
        method=door.method,
    )
    assert declared.status == 413, (door, declared)
    assert door.method == "HEAD" or f"{MAX_WEBHOOK_BODY:,}" in declared.text
    # Chunked, with no length to check: a door that reads it is refused at the cap, one that
    # does not refuses the request as it stands; either answers while the body still comes.
    # (A door that reads no body closes on the rest, and the reset may drop its answer.)
    try:
        chunked = await knock(
            port,
            path,
            {"Host": local, "Transfer-Encoding": "chunked"} | present,
            chunks=_endless_body(),
            method=door.method,
        )
    except ConnectionResetError:
        assert not door.reads_body, door
        return
    assert chunked.status == (413 if door.reads_body else 403), (door, chunked)
    assert chunked.sent < FIFTY_MB


async def unsigned_refused(port: int, door: Door, path: str) -> Answer:
    """Without its signature header: refused before the body, which is never sent, is read."""
    assert door.header is not None
    answer = await knock(
        port,
        path,
        {
            "Host": f"127.0.0.1:{port}",
            "Content-Length": "1000",
            "Content-Type": CONTENT_TYPES[door.signing],
        },
        method=door.method,
    )
    assert answer.status == 403 and door.header in answer.text, (door, answer)
    return answer
