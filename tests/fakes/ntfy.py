"""ntfy for tests: its JSON publish API (``POST /`` with ``{"topic", "message", "title",
"priority", "tags", "actions"}``, an access token as ``Authorization: Bearer tk_…``) and its
health check, refusing what ntfy refuses (a topic it would not name, a priority out of 1 to 5,
more than three actions, an action without a label or URL, more than 4,096 bytes of message, a
protected topic without its token), with ntfy's error shape ``{"code", "http", "error"}``.

And the human's phone: :meth:`FakeNtfy.press` does what the ntfy app does with an ``http``
action, posting to the action's URL (through the tunnel in front of the gateway)."""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.serve import LocalServer

TOKEN = "tk_" + "t" * 29
_TOPIC = re.compile(r"^[-_A-Za-z0-9]{1,64}$")
_MAX_BYTES = 4_096


def _error(status: int, code: int, error: str) -> JSONResponse:
    body = {"code": code, "http": status, "error": error, "link": "https://ntfy.sh/docs/publish/"}
    return JSONResponse(body, status_code=status)


class FakeNtfy:
    def __init__(self, token: str | None = TOKEN) -> None:
        # With a token, every topic is protected: a publish without it is refused.
        self.token = token
        self.published: list[dict[str, Any]] = []
        self.presses: list[httpx.Response] = []
        self._failures: list[int] = []
        app = Starlette(
            routes=[
                Route("/", self._publish, methods=["POST"]),
                Route("/v1/health", self._health, methods=["GET"]),
            ]
        )
        self.server = LocalServer(app)

    @property
    def base_url(self) -> str:
        return self.server.url

    def fail_next(self, *statuses: int) -> None:
        self._failures.extend(statuses)

    async def _health(self, request: Request) -> JSONResponse:
        return JSONResponse({"healthy": True})

    async def _publish(self, request: Request) -> JSONResponse:
        if self._failures:
            status = self._failures.pop(0)
            return _error(status, status * 100 + 1, "scripted failure")
        if self.token is not None:
            auth = request.headers.get("authorization", "")
            if auth != f"Bearer {self.token}":
                return _error(403, 40301, "forbidden")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, 40024, "invalid request: body must be JSON")
        topic = body.get("topic")
        if not isinstance(topic, str) or not _TOPIC.match(topic):
            return _error(400, 40009, "invalid request: topic invalid")
        message = body.get("message", "")
        if len(str(message).encode()) > _MAX_BYTES:
            return _error(413, 41301, "request entity too large: message too large")
        priority = body.get("priority", 3)
        if priority not in (1, 2, 3, 4, 5):
            return _error(400, 40007, "invalid priority")
        actions = body.get("actions") or []
        if len(actions) > 3:
            return _error(400, 40018, "invalid request: actions invalid: too many actions")
        for action in actions:
            if action.get("action") not in ("view", "http", "broadcast"):
                return _error(400, 40018, "invalid request: actions invalid: action type")
            if not action.get("label") or (
                action["action"] != "broadcast" and not action.get("url")
            ):
                return _error(400, 40018, "invalid request: actions invalid: label or url")
        now = int(time.time())
        published = {
            "id": secrets.token_hex(6),
            "time": now,
            "expires": now + 43_200,
            "event": "message",
            "topic": topic,
            "message": message,
            **{k: body[k] for k in ("title", "tags", "priority") if k in body},
            "actions": [{"id": secrets.token_hex(5), **a} for a in actions],
        }
        self.published.append(published)
        return JSONResponse(published)

    def to(self, topic: str) -> list[dict[str, Any]]:
        return [p for p in self.published if p["topic"] == topic]

    def about(self, text: str) -> dict[str, Any] | None:
        """The first notification whose message holds `text` (None until one does)."""
        return next((p for p in self.published if text in p["message"]), None)

    async def press(
        self, notification: dict[str, Any], label: str, *, public_url: str, local_url: str
    ) -> httpx.Response:
        """The human presses the button `label`: the phone posts to its URL, which reaches the
        gateway through the tunnel from `public_url` to `local_url`."""
        action = next(a for a in notification["actions"] if a["label"] == label)
        return await self.post_action(action, public_url=public_url, local_url=local_url)

    async def post_action(
        self, action: dict[str, Any], *, public_url: str, local_url: str
    ) -> httpx.Response:
        assert action["action"] == "http" and action["url"].startswith(public_url), action
        url = local_url + action["url"].removeprefix(public_url)
        async with httpx.AsyncClient() as http:
            answer = await http.request(
                action.get("method", "POST"),
                url,
                headers=action.get("headers") or {},
                content=action.get("body", ""),
            )
        self.presses.append(answer)
        return answer
