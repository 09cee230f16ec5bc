"""Push notifications through ntfy (``chat.ntfy``): channel ``ntfy:<topic>``, the topic the
human's phone subscribes to.

Sending: ntfy's JSON publish API, ``POST <server>/`` with ``{"topic", "message", "title",
"priority", "tags", "actions"}`` and the access token as a bearer token; the answer is the
published message, whose ``id`` is kept. ntfy takes at most 4,096 bytes of message and three
action buttons per notification. An approval's buttons are ``http`` actions: the phone itself
posts to the gateway's published URL (``server.public_url``) with a one-time token signed for
that approval and that answer (:mod:`gateway.approvals.push`).

Receiving: a topic is one-way here. Anyone who may publish to it is nobody the gateway can tell
apart, so nothing published to it is typed into an agent; a human answers an approval with its
buttons, and writes to an agent from any other surface. The receiver only watches the server's
health, so `status` and `doctor` tell the truth about it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from starlette.routing import BaseRoute

from agentcomms.config import Config, NtfyConfig
from agentcomms.errors import ChatProviderUnavailable, RateLimited, SendError, SendRefused
from agentcomms.models import utcnow
from agentcomms.transports import InboundSink, LinkStatus, ReceiptStage

log = logging.getLogger(__name__)

# ntfy refuses a message of more than 4,096 bytes (or turns it into an attachment, where the
# server keeps attachments): a piece of this many characters fits however they are spelt.
MAX_BYTES = 4_096
MAX_TEXT = MAX_BYTES // 4
MAX_ACTIONS = 3  # ntfy shows at most three buttons under a notification
SEND_TIMEOUT_S = 20.0
DEFAULT_RETRY_AFTER_S = 10.0
# How often the receiver looks at the server's health: seldom once it answers, sooner while not.
HEALTHY_EVERY_S = 300.0
UNHEALTHY_EVERY_S = 30.0

# ntfy's priorities: 1 min, 2 low, 3 default, 4 high, 5 urgent (a phone rings through do-not-disturb).
Priority = Literal[1, 2, 3, 4, 5]
URGENT: Priority = 5
HIGH: Priority = 4


@dataclass(frozen=True)
class PushButton:
    """An ``http`` action: a press makes the phone POST to ``url``, and clears the notification."""

    label: str
    url: str

    def as_json(self) -> dict[str, Any]:
        return {
            "action": "http",
            "label": self.label,
            "url": self.url,
            "method": "POST",
            "clear": True,
        }


@dataclass(frozen=True)
class Notification:
    message: str
    title: str | None = None
    priority: Priority = 3
    tags: tuple[str, ...] = ()
    buttons: tuple[PushButton, ...] = field(default=())


class NtfySender:
    """Publishes with a client of its own per call: an activity holds no connection between
    sends, and a renewed token is read at the next send."""

    max_chars = MAX_TEXT

    def __init__(self, cfg: Config) -> None:
        self._section: NtfyConfig = cfg.chat.ntfy

    async def publish(self, topic: str, note: Notification) -> str:
        """Publish `note` to `topic`; ntfy's id of the message."""
        if len(note.buttons) > MAX_ACTIONS:
            raise ValueError(f"ntfy shows at most {MAX_ACTIONS} buttons, not {len(note.buttons)}")
        body: dict[str, Any] = {"topic": topic, "message": note.message, "priority": note.priority}
        if note.title:
            body["title"] = note.title
        if note.tags:
            body["tags"] = list(note.tags)
        if note.buttons:
            body["actions"] = [b.as_json() for b in note.buttons]
        headers = {}
        if self._section.token is not None:
            headers["Authorization"] = f"Bearer {self._section.token.get_secret_value()}"
        try:
            async with httpx.AsyncClient(timeout=SEND_TIMEOUT_S) as client:
                response = await client.post(
                    self._section.server.rstrip("/") + "/", json=body, headers=headers
                )
        except httpx.HTTPError as exc:
            raise ChatProviderUnavailable(
                f"ntfy ({self._section.server}) did not answer: {type(exc).__name__}"
            ) from exc
        if not response.is_success:
            raise ntfy_error(response, topic)
        try:
            return str(response.json().get("id", ""))
        except (ValueError, AttributeError):
            return ""

    async def send_text(self, chat_id: str, text: str, *, reply_to: str | None = None) -> str:
        # A notification quotes nothing: `reply_to` has no place in it.
        return await self.publish(chat_id, Notification(message=text))

    async def receipt(
        self, chat_id: str, message_id: str, stage: ReceiptStage, *, note: str | None = None
    ) -> None:
        # Nothing the human sent arrives through a topic, so there is no message to mark.
        return None

    async def close(self) -> None:
        pass


def ntfy_error(response: httpx.Response, topic: str) -> SendError:
    """ntfy's error answer (``{"code", "http", "error", "link"}``) as a SendError: wait, retry
    with backoff, or fail with what to fix."""
    try:
        error = response.json()
    except ValueError:
        error = {}
    said = error.get("error") if isinstance(error, dict) else None
    status = response.status_code
    what = f"ntfy ({status}): {said or response.reason_phrase}"
    if status == 429:
        try:
            wait = float(response.headers.get("Retry-After", ""))
        except ValueError:
            wait = DEFAULT_RETRY_AFTER_S
        return RateLimited(what, retry_after=max(wait, 0.1))
    if status >= 500:
        return ChatProviderUnavailable(what)
    if status in (401, 403):
        return SendRefused(
            f"{what}: topic {topic!r} may not be published to with chat.ntfy.token as it is "
            "(set an access token with write access to it, tk_...)"
        )
    return SendRefused(f"{what} (publishing to topic {topic!r})")


class NtfyReceiver:
    """Watches the server's health (``GET /v1/health``): nothing is received from a topic."""

    def __init__(self, cfg: Config) -> None:
        self._section = cfg.chat.ntfy
        self.status = LinkStatus("connecting", since=utcnow())
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="ntfy health")

    async def _watch(self) -> None:
        url = self._section.server.rstrip("/") + "/v1/health"
        while True:
            try:
                async with httpx.AsyncClient(timeout=SEND_TIMEOUT_S) as client:
                    answer = await client.get(url)
                healthy = answer.is_success and answer.json().get("healthy") is True
                problem = None if healthy else f"{url} answered {answer.status_code}: not healthy"
            except (httpx.HTTPError, ValueError, AttributeError) as exc:
                problem = f"{url} did not answer: {type(exc).__name__}"
            self._set("connected" if problem is None else "reconnecting", problem)
            await asyncio.sleep(HEALTHY_EVERY_S if problem is None else UNHEALTHY_EVERY_S)

    def _set(self, state: Literal["connected", "reconnecting"], error: str | None) -> None:
        if state != self.status.state or error != self.status.error:
            if error:
                log.warning("ntfy: %s", error)
            self.status = LinkStatus(state, error, since=utcnow())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def routes(self) -> list[BaseRoute]:
        # An approval's buttons come back to the approvals' own route (gateway/approvals/push.py).
        return []


def receiver(cfg: Config, sink: InboundSink) -> NtfyReceiver:
    return NtfyReceiver(cfg)


def sender(cfg: Config) -> NtfySender:
    return NtfySender(cfg)
