"""Slack, through slack_sdk: Socket Mode by default, or the Events API over HTTP.

Socket Mode (``mode: "socket"``): the gateway asks for a WebSocket URL with the app-level token
(``apps.connections.open``) and Slack sends each event and each button press over it as an
envelope. A message's envelope is acknowledged only once the gateway kept the message (posted to
a mailbox, or refused and recorded): one in flight when the gateway stops is sent again by Slack
on the next connection, and its event id, from the channel and the message's ``ts``, makes it the
same event; Slack tries an envelope only a few times, so one the gateway cannot keep yet
(Temporal unreachable) is tried again here until kept, holding later ones back. Messages are handled one at a time, in the order Slack sent them. A press is
acknowledged at once (Slack shows the presser an error after 3 s), then decided; what the
presser is told goes to them alone (``chat.postEphemeral``). When the socket drops, a new URL is
asked for after a backoff, and the status says why meanwhile.

The Events API (``mode: "http"``): Slack posts events to ``/webhooks/slack/events`` and presses
to ``/webhooks/slack/interactivity`` on the gateway's HTTP listener (``server.public_url`` in
front of it). Every request's signature and timestamp are checked against
``chat.slack.signing_secret`` before its body is read as anything (a forgery, a stale request,
a replay are refused); an event is answered 200 only once kept, so Slack sends again one that
was not.

Kept out: the app's own messages, other bots', edits, joins and the like; the bot's token is
asked who it is (``auth.test``) at start, and the scopes Slack names in its answer are checked,
so a missing one shows in ``status`` and ``doctor`` rather than as a failed send later.

Sending: :mod:`agentcomms.transports._slack_sender`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import httpx
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from agentcomms.config import Config
from agentcomms.errors import AttachmentRefused, VoiceNoteRefused
from agentcomms.models import utcnow
from agentcomms.transports import (
    Attachment,
    InboundMessage,
    InboundResult,
    InboundSink,
    LinkState,
    LinkStatus,
    ShownInButtons,
    VoiceNote,
    read_at_most,
)
from agentcomms.transports._slack_events import IMAGE, SignedRequests, inbound, press
from agentcomms.transports._slack_sender import (
    PASSING_ERRORS,
    SLACK_API,
    TOKEN_ERRORS,
    TOKEN_FIX,
    SlackSender,
    web_client,
)
from agentcomms.transports.slack_manifest import (
    EVENTS_PATH,
    INTERACTIVITY_PATH,
    scope_problem,
)

log = logging.getLogger(__name__)

RECONNECT_FIRST_S = 1.0
RECONNECT_CAP_S = 60.0
CONNECT_TIMEOUT_S = 15.0
WATCH_S = 0.5  # how often a connected socket is looked at
# Where Slack serves a file's bytes; the bot token goes to no other host.
SLACK_FILES_HOST = "files.slack.com"
APP_TOKEN_FIX = (
    "check chat.slack.app_token (your app, Basic Information, App-Level Tokens: a token "
    "xapp-… with connections:write; Socket Mode must be on)"
)


class SlackReceiver:
    def __init__(self, cfg: Config, sink: InboundSink) -> None:
        self._section = cfg.chat.slack
        self._sink = sink
        self._web = web_client(self._section)
        self._sender = SlackSender(cfg)
        self._signed = SignedRequests(
            self._section.signing_secret.get_secret_value()
            if self._section.signing_secret is not None
            else ""
        )
        self._queue: asyncio.Queue[tuple[dict[str, Any], str | None]] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._socket: SocketModeClient | None = None
        self._own_user: str | None = None
        self._own_bot: str | None = None
        self._problem: str | None = None  # a scope missing: connected, but saying so
        self.status = LinkStatus("connecting")

    @property
    def http(self) -> bool:
        return self._section.mode == "http"

    async def start(self) -> None:
        self._spawn(self._run(), "slack connection")
        self._spawn(self._keep_messages(), "slack messages")

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._socket is not None:
            await _untyped(self._socket).close()

    def routes(self) -> list[BaseRoute]:
        if not self.http:
            return []
        return [
            Route(EVENTS_PATH, self._events, methods=["POST"]),
            Route(INTERACTIVITY_PATH, self._interactivity, methods=["POST"]),
        ]

    def _spawn(self, work: Any, name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- connecting ------------------------------------------------------------------------------

    async def _run(self) -> None:
        """Know who the bot is; then keep a socket open (socket mode), saying why when not."""
        backoff = RECONNECT_FIRST_S
        while True:
            try:
                await self._identify()
                if self.http:
                    self._set("connected", self._problem)
                    return
                await self._connect_and_watch()
                error = "the Slack socket closed"
                backoff = RECONNECT_FIRST_S
            except SlackApiError as exc:
                reason = str(exc.response.get("error") or "")
                if reason in TOKEN_ERRORS or reason == "not_allowed_token_type":
                    which = TOKEN_FIX if self._own_user is None else APP_TOKEN_FIX
                    self._set("failed", f"Slack refused the token ({reason}): {which}")
                    return
                error = f"Slack answered {exc.response.status_code}: {reason}"
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                error = f"could not reach Slack: {exc or type(exc).__name__}"
            except Exception as exc:  # the link must outlive any surprise: say it, and retry
                log.exception("slack receiver")
                error = f"{type(exc).__name__}: {exc}"
            self._set("reconnecting", error)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RECONNECT_CAP_S)

    async def _identify(self) -> None:
        if self._own_user is not None:
            return
        answer = await self._web.auth_test()
        self._problem = scope_problem(answer.headers.get("x-oauth-scopes"))
        if self._problem:
            log.warning("slack: %s", self._problem)
        self._own_user, self._own_bot = answer.get("user_id"), answer.get("bot_id")

    async def _connect_and_watch(self) -> None:
        assert self._section.app_token is not None
        app_token = self._section.app_token.get_secret_value()
        opened = await web_client(self._section, app_token).apps_connections_open(
            app_token=app_token
        )
        socket = SocketModeClient(
            app_token,
            web_client=web_client(self._section, app_token),
            # This receiver opens a new socket itself when one drops, after a backoff; Slack's
            # own "disconnect" (a refresh) is still followed by the SDK at once.
            auto_reconnect_enabled=False,
        )
        socket.wss_uri = str(opened["url"])
        socket.message_listeners.append(self._said)
        socket.socket_mode_request_listeners.append(self._request)
        self._socket = socket
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await _untyped(socket).connect()
            # The SDK tells of a lost socket by no event, only when asked.
            while await socket.is_connected():  # noqa: ASYNC110
                await asyncio.sleep(WATCH_S)
        finally:
            self._socket = None
            await _untyped(socket).close()

    async def _said(self, _: Any, message: dict[str, Any], __: str | None) -> None:
        if message.get("type") == "hello":
            self._set("connected", self._problem)

    def _set(self, state: LinkState, error: str | None = None) -> None:
        if state != self.status.state or error != self.status.error:
            if error:
                log.warning("slack %s: %s", state, error)
            self.status = LinkStatus(state, error, utcnow())

    # ---- Socket Mode -----------------------------------------------------------------------------

    async def _request(self, socket: Any, request: SocketModeRequest) -> None:
        # Synchronous up to the queue: the SDK starts one task per envelope, in order.
        if request.type == "events_api":
            event = (request.payload or {}).get("event") or {}
            self._queue.put_nowait((event, request.envelope_id))
            return
        await self._ack(request.envelope_id)
        if request.type == "interactive":
            await self._pressed(request.payload or {})

    async def _ack(self, envelope_id: str | None) -> None:
        socket = self._socket
        if envelope_id is None or socket is None:
            return  # not acknowledged: Slack sends it again on the next socket
        try:
            await socket.send_socket_mode_response(SocketModeResponse(envelope_id=envelope_id))
        except (aiohttp.ClientError, OSError, ConnectionError) as exc:
            log.warning("slack: envelope %s not acknowledged: %s", envelope_id, exc)

    async def _keep_messages(self) -> None:
        while True:
            event, envelope_id = await self._queue.get()
            try:
                received = inbound(
                    event, own_user=self._own_user, voice=self._clip, attach=self._attached
                )
            except Exception:  # one odd event must not stop the ones behind it
                log.exception("slack: an event not understood")
                received = None
            if received is not None:
                await self._accept_until_kept(received)
            await self._ack(envelope_id)

    async def _accept_until_kept(self, received: InboundMessage) -> None:
        """Slack gives up on an envelope after a few tries, so one the gateway could not keep
        (Temporal unreachable) is tried here until kept, holding later ones back in order."""
        delay = RECONNECT_FIRST_S
        while True:
            try:
                await self._accept(received)
                return
            except Exception:
                log.exception("slack: %s not kept; trying again", received.channel_id)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_CAP_S)

    async def _accept(self, received: InboundMessage) -> InboundResult:
        result = await self._sink.accept(received)
        if result.reply:
            try:  # in the thread of the message it answers
                await self._sender.send_text(
                    received.chat_id, result.reply, reply_to=received.message_id
                )
            except Exception as exc:  # the message was handled; only the answer is lost
                log.warning("slack: could not answer %s: %s", received.channel_id, exc)
        return result

    async def _pressed(self, payload: dict[str, Any]) -> None:
        """A press on a button under one of the app's messages: decided by the sink, whose
        answer the presser alone sees (a tick's, only when the buttons do not show it)."""
        if payload.get("type") != "block_actions":
            return
        pressed = press(payload, own_user=self._own_user, own_bot=self._own_bot)
        if pressed is None:
            log.warning("slack: an interaction that is not a press on our message: refused")
            return
        try:
            told = await self._sink.button(pressed)
        except Exception:
            log.exception("slack: a button press in %s not taken", pressed.channel_id)
            told = "Your answer could not be recorded just now: press the button again."
        if isinstance(told, ShownInButtons):
            return
        try:
            await self._sender.tell(pressed.chat_id, pressed.sender_id, told)
        except Exception as exc:  # the press was taken; only the word to the presser is lost
            log.warning("slack: could not answer a button press: %s", exc)

    def _clip(self, file: dict[str, Any]) -> VoiceNote:
        """A voice clip's file, fetched only when the gateway wants it (never for a stranger)."""
        duration_ms = file.get("duration_ms")
        size = file.get("size")
        return VoiceNote(
            fetch=functools.partial(self._download, file, refused=VoiceNoteRefused),
            content_type=str(file.get("mimetype") or "audio/webm"),
            duration_s=duration_ms / 1000 if isinstance(duration_ms, int | float) else None,
            size=size if isinstance(size, int) else None,
        )

    def _attached(self, file: dict[str, Any]) -> Attachment:
        """A photo or document a person shared, fetched only when the gateway wants it."""
        size = file.get("size")
        image = str(file.get("mimetype") or "").startswith(IMAGE)
        return Attachment(
            fetch=functools.partial(self._download, file, refused=AttachmentRefused),
            kind="photo" if image else "document",
            name=str(file.get("name") or "") or None,
            size=size if isinstance(size, int) else None,
        )

    async def _download(
        self, file: dict[str, Any], max_bytes: int, *, refused: type[Exception]
    ) -> bytes:
        """A shared file's bytes, fetched with the bot token (scope files:read) from Slack's
        file host only. An event may carry a file's id alone (``file_access:
        check_file_info``): ``files.info`` then says where it is."""
        if not (file.get("url_private_download") or file.get("url_private")):
            file = await self._file_info(str(file.get("id") or ""), refused)
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        size = file.get("size")
        if httpx.URL(url).host not in self._file_hosts():
            raise refused("its address is not Slack's file server")
        if isinstance(size, int) and size > max_bytes:
            raise refused(
                f"it is {size / 1e6:.1f} MB, more than the {max_bytes / 1e6:.1f} MB it may take"
            )
        assert self._section.bot_token is not None
        headers = {"Authorization": f"Bearer {self._section.bot_token.get_secret_value()}"}
        # Redirects are followed; httpx drops the token on the way to another host.
        async with (
            httpx.AsyncClient(timeout=30, follow_redirects=True) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                raise refused(
                    f"Slack would not hand it over ({response.status_code}: does the app "
                    "have the files:read scope?); please send it again"
                )
            response.raise_for_status()  # Slack away: the message comes again
            return await read_at_most(response, max_bytes, refused)

    async def _file_info(self, file_id: str, refused: type[Exception]) -> dict[str, Any]:
        try:
            answer = await self._web.files_info(file=file_id)
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "")
            if exc.response.status_code >= 500 or error in PASSING_ERRORS:
                raise  # Slack away: the message comes again
            raise refused(
                f"Slack would not say where it is ({error}: does the app have the files:read "
                "scope?)"
            ) from exc
        found = answer.get("file")
        if not isinstance(found, dict):
            raise refused("Slack said nothing of it")
        return found

    def _file_hosts(self) -> set[str]:
        hosts = {SLACK_FILES_HOST}
        if self._section.base_url and self._section.base_url != SLACK_API:
            hosts.add(httpx.URL(self._section.base_url).host)  # a proxy, tests
        return hosts

    # ---- the Events API --------------------------------------------------------------------------

    async def _signed_body(self, request: Request) -> bytes | Response:
        """The body, once Slack's signature over it checked out; otherwise the refusal (what
        the headers alone refuse is refused before the body is read)."""
        stamp = request.headers.get("X-Slack-Request-Timestamp")
        signature = request.headers.get("X-Slack-Signature")
        refused = self._signed.before_body(stamp, signature)
        if refused is None:
            body = await request.body()
            refused = self._signed.check(stamp, signature, body)
        if refused is not None:
            return PlainTextResponse(f"forbidden: {refused.reason}", status_code=403)
        return body

    async def _events(self, request: Request) -> Response:
        body = await self._signed_body(request)
        if isinstance(body, Response):
            return body
        try:
            call = json.loads(body)
            kind = call["type"]
        except (ValueError, KeyError, TypeError):
            return PlainTextResponse("not an Events API request", status_code=400)
        if kind == "url_verification":  # Slack checks the URL once, when it is set
            return JSONResponse({"challenge": str(call.get("challenge", ""))})
        if kind != "event_callback":
            return PlainTextResponse("")
        received = inbound(
            call.get("event") or {},
            own_user=self._own_user,
            voice=self._clip,
            attach=self._attached,
        )
        if received is not None:
            try:
                await self._accept(received)
            except Exception:  # not kept: Slack retries a non-2xx answer, which must count
                log.exception("slack: %s not kept", received.channel_id)
                self._signed.forget(request.headers.get("X-Slack-Signature", ""))
                return PlainTextResponse("not kept, send it again", status_code=503)
        return PlainTextResponse("")

    async def _interactivity(self, request: Request) -> Response:
        body = await self._signed_body(request)
        if isinstance(body, Response):
            return body
        try:
            payload = json.loads(parse_qs(body.decode())["payload"][0])
        except (ValueError, KeyError, IndexError, UnicodeDecodeError):
            return PlainTextResponse("not an interaction payload", status_code=400)
        # Answered at once (Slack shows the presser an error after 3 s), decided beside it.
        self._spawn(self._pressed(payload), "slack press")
        return PlainTextResponse("")


__all__ = ["SlackReceiver", "SlackSender", "receiver", "sender"]


def _untyped(socket: SocketModeClient) -> Any:
    """The Socket Mode client's methods that slack_sdk left without type hints."""
    return socket


def receiver(cfg: Config, sink: InboundSink) -> SlackReceiver:
    return SlackReceiver(cfg, sink)


def sender(cfg: Config) -> SlackSender:
    return SlackSender(cfg)
