"""Slack for tests: its Web API (``/api/<method>``) and its Socket Mode WebSocket, as slack_sdk
uses them, and the Events API's signed requests as Slack makes them.

Web API: ``auth.test``, ``apps.connections.open`` (the app-level token only), ``chat.postMessage``,
``chat.update``, ``chat.postEphemeral``, ``reactions.add``, ``reactions.remove``,
``conversations.history``, ``files.info``, and an upload as slack_sdk's ``files_upload_v2`` makes
it (``files.getUploadURLExternal``, the bytes posted to the URL it gave, which takes no token, then
``files.completeUploadExternal`` sharing them in a channel or thread); Slack's answer shapes (``{"ok": true, …}`` or ``{"ok": false, "error"}``
with status 200, ``ratelimited`` with 429 and ``Retry-After``), and the ``x-oauth-scopes`` header
that names the token's scopes. Socket Mode: ``apps.connections.open`` hands out a one-time
``wss`` URL; the socket says ``hello``, then sends envelopes (``events_api``, ``interactive``)
that the app acknowledges by ``envelope_id``; one not acknowledged is sent again on the next
connection with ``retry_attempt`` raised, as Slack does. A test plays the human
(``human_says``, ``human_presses``, ``human_sends_file``), scripts failures (``fail_next("chat.postMessage",
"ratelimited")``), and reads what the bot did (``sent``, ``updates``, ``ephemerals``,
``reactions``, ``acks``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import uuid
from typing import Any
from urllib.parse import urlencode

from aiohttp import WSMsgType, web

from tests.fakes.serve import free_port

BOT_SCOPES = frozenset(
    {
        "chat:write",
        "reactions:write",
        "channels:history",
        "groups:history",
        "im:history",
        "mpim:history",
        "files:read",
        "files:write",
    }
)
ALICE = "U0ALICE"


class FakeSlack:
    def __init__(self) -> None:
        self.bot_token = "xoxb-1-fake-bot-token"
        self.app_token = "xapp-1-fake-app-token"
        self.signing_secret = "fake-signing-secret"
        self.team_id, self.app_id = "T0TEAM", "A0APP"
        self.bot_user, self.bot_id = "U0BOT", "B0BOT"
        self.scopes = set(BOT_SCOPES)  # what the bot token was granted
        self.port = free_port()
        self.general = "C0GENERAL"
        self.known: set[str] = {self.general}
        self.sent: list[dict[str, Any]] = []  # messages the bot posted, as they are now
        self.updates: list[dict[str, Any]] = []  # each chat.update: the message after it
        self.ephemerals: list[dict[str, Any]] = []  # chat.postEphemeral, in order
        self.reactions: list[dict[str, Any]] = []  # {action, name, channel, timestamp}
        self.acks: dict[str, dict[str, Any]] = {}  # envelope id -> the ack as sent
        self.connections = 0  # sockets that said hello
        self.files: dict[str, bytes] = {}  # a file's id -> its bytes, served with the bot token
        self.downloads: list[str] = []  # the ids of the files the app fetched
        self.shared: list[dict[str, Any]] = []  # files the bot uploaded and shared, in order
        self._uploads: dict[str, dict[str, Any]] = {}  # upload id -> the file asked for
        self._described: dict[str, dict[str, Any]] = {}  # a person's file's id -> files.info
        self._tickets: set[str] = set()
        self._unacked: dict[str, dict[str, Any]] = {}  # envelope id -> envelope
        self._socket: web.WebSocketResponse | None = None
        self._failures: dict[str, list[str]] = {}
        self._ts = itertools.count(1)
        self._runner: web.AppRunner | None = None

    # ---- the test's side -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What chat.slack.base_url is set to (slack_sdk appends the method's name)."""
        return f"http://127.0.0.1:{self.port}/api/"

    def connected(self) -> bool:
        return self._socket is not None and not self._socket.closed

    def dm_channel(self) -> str:
        channel = f"D0{uuid.uuid4().hex[:8].upper()}"
        self.known.add(channel)
        return channel

    def new_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def message(
        self,
        channel: str,
        text: str,
        *,
        user: str = ALICE,
        name: str = "Alice",
        thread_ts: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A ``message`` event as Slack sends it for a person's words."""
        ts = self.new_ts()
        event: dict[str, Any] = {
            "type": "message",
            "channel": channel,
            "user": user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "team": self.team_id,
            "channel_type": "im" if channel.startswith("D") else "channel",
            "user_profile": {"real_name": name, "display_name": name, "name": name.lower()},
            **extra,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        return event

    def event_callback(self, event: dict[str, Any]) -> dict[str, Any]:
        """The Events API's wrapping of `event` (the body of a request, a Socket Mode payload)."""
        return {
            "token": "deprecated-verification-token",
            "team_id": self.team_id,
            "api_app_id": self.app_id,
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{uuid.uuid4().hex[:10].upper()}",
            "event_time": int(time.time()),
        }

    def human_says(self, channel: str, text: str, **kw: Any) -> dict[str, Any]:
        """A person writes in `channel`; the event goes over the socket. Returns the event."""
        event = self.message(channel, text, **kw)
        self.push("events_api", self.event_callback(event))
        return event

    def press(
        self, message: dict[str, Any], value: str, *, user: str = ALICE, name: str = "Alice"
    ) -> dict[str, Any]:
        """The ``block_actions`` payload of a person pressing the button `value` under `message`."""
        button = next(
            (
                element
                for block in message.get("blocks", [])
                for element in block.get("elements", [])
                if element.get("value") == value
            ),
            {"type": "button", "action_id": value, "value": value, "text": {"text": value}},
        )
        return {
            "type": "block_actions",
            "team": {"id": self.team_id},
            "api_app_id": self.app_id,
            "user": {"id": user, "username": name.lower(), "name": name.lower()},
            "channel": {"id": message["channel"]},
            "container": {
                "type": "message",
                "message_ts": message["ts"],
                "channel_id": message["channel"],
            },
            "message": message,
            "actions": [{**button, "block_id": "b", "action_ts": self.new_ts()}],
            "trigger_id": uuid.uuid4().hex,
            "response_url": f"http://127.0.0.1:{self.port}/actions/{uuid.uuid4().hex}",
        }

    def human_sends_clip(
        self, channel: str, audio: bytes, *, mimetype: str = "audio/ogg", **kw: Any
    ) -> dict[str, Any]:
        """A person records a voice clip in `channel` (a file share with no words); the event."""
        file_id = f"F0{len(self.files) + 1:08d}"
        self.files[file_id] = audio
        url = f"http://127.0.0.1:{self.port}/files-pri/{self.team_id}-{file_id}/audio_clip.ogg"
        clip = {
            "id": file_id,
            "name": "audio_clip.ogg",
            "mimetype": mimetype,
            "filetype": mimetype.split("/")[-1],
            "subtype": "slack_audio",
            "size": len(audio),
            "duration_ms": 2000,
            "url_private": url,
            "url_private_download": url + "?download=1",
        }
        event = self.message(channel, "", subtype="file_share", files=[clip], **kw)
        self.push("events_api", self.event_callback(event))
        return event

    def human_sends_file(
        self,
        channel: str,
        name: str,
        content: bytes,
        *,
        text: str = "",
        mimetype: str = "application/octet-stream",
        info_only: bool = False,
        **kw: Any,
    ) -> dict[str, Any]:
        """A person shares a file in `channel` (with `text`, maybe none); the event. With
        `info_only` the event names the file by id alone (``file_access: check_file_info``), as
        Slack does for some shares, and ``files.info`` says the rest."""
        file = self._file_object(name, content, mimetype)
        if info_only:
            file = {"id": file["id"], "file_access": "check_file_info"}
        event = self.message(channel, text, subtype="file_share", files=[file], **kw)
        self.push("events_api", self.event_callback(event))
        return event

    def _file_object(self, name: str, content: bytes, mimetype: str) -> dict[str, Any]:
        """A new file, as Slack describes it (and ``files.info`` later tells it)."""
        file_id = f"F0{len(self.files) + 1:08d}"
        self.files[file_id] = content
        url = f"http://127.0.0.1:{self.port}/files-pri/{self.team_id}-{file_id}/{name}"
        self._described[file_id] = {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rpartition(".")[2],
            "size": len(content),
            "url_private": url,
            "url_private_download": url + "?download=1",
        }
        return dict(self._described[file_id])

    def human_presses(self, message: dict[str, Any], value: str, **kw: Any) -> dict[str, Any]:
        """A person presses a button under the bot's `message`; over the socket. The payload."""
        payload = self.press(message, value, **kw)
        self.push("interactive", payload)
        return payload

    def push(self, kind: str, payload: dict[str, Any]) -> str:
        """An envelope of `kind` to the app's socket (or to the next one); its envelope id."""
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind == "interactive",
            "retry_attempt": 0,
            "retry_reason": "",
        }
        self._unacked[envelope_id] = envelope
        if self.connected():
            assert self._socket is not None
            envelope["sent"] = True
            sent = {k: v for k, v in envelope.items() if k != "sent"}
            asyncio.get_running_loop().create_task(self._socket.send_json(sent))
        return envelope_id

    def sign(
        self, body: bytes, *, timestamp: int | None = None, secret: str | None = None
    ) -> dict[str, str]:
        """The headers Slack signs a request to the app with (``v0`` HMAC-SHA256)."""
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        key = (secret or self.signing_secret).encode()
        digest = hmac.new(key, b"v0:" + stamp.encode() + b":" + body, hashlib.sha256)
        return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest.hexdigest()}"}

    @staticmethod
    def interactivity_body(payload: dict[str, Any]) -> bytes:
        """How Slack posts an interaction to the app's URL: a form with one ``payload`` field."""
        return urlencode({"payload": json.dumps(payload)}).encode()

    def request_for(self, approval: str) -> dict[str, Any] | None:
        """The message that posted approval `approval` (with its buttons), once sent."""
        return next((m for m in self.sent if f"approval {approval}" in rendered(m)), None)

    def texts_to(self, channel: str) -> list[str]:
        return [m["text"] for m in self.sent if m["channel"] == channel]

    def fail_next(self, method: str, *errors: str) -> None:
        """The next calls of `method` fail with these Slack errors, in order (``ratelimited``
        is a 429 with ``Retry-After: 1``; ``fatal_error`` a 500)."""
        self._failures.setdefault(method, []).extend(errors)

    async def drop_socket(self) -> None:
        """Slack closes the app's socket (a deploy on its side); the SDK opens another."""
        if self._socket is not None:
            await self._socket.close()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._call)
        app.router.add_get("/link", self._websocket)
        app.router.add_get("/files-pri/{team_file}/{name}", self._file)
        app.router.add_post("/upload/v1/{upload_id}", self._upload)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is None:
            return
        if self._socket is not None:
            await self._socket.close()
        await self._runner.cleanup()
        self._runner = None

    # ---- the Web API ---------------------------------------------------------------------------

    async def _call(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        params: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            params.update(await request.json())
        elif request.can_read_body:
            params.update(dict(await request.post()))
        if not token:
            token = str(params.get("token", ""))
        app_method = method == "apps.connections.open"
        if token != (self.app_token if app_method else self.bot_token):
            # Slack names a bot token sent where an app token belongs, and the reverse.
            wrong = token in (self.app_token, self.bot_token)
            return _answer(
                {"ok": False, "error": "not_allowed_token_type" if wrong else "invalid_auth"}
            )
        if self._failures.get(method):
            error = self._failures[method].pop(0)
            if error == "ratelimited":
                return _answer({"ok": False, "error": error}, 429, {"Retry-After": "1"})
            if error == "fatal_error":
                return _answer({"ok": False, "error": error}, 500)
            return _answer({"ok": False, "error": error})
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        if handler is None:
            return _answer({"ok": False, "error": "unknown_method"})
        result: dict[str, Any] = handler(params)
        scopes = {} if app_method else {"x-oauth-scopes": ",".join(sorted(self.scopes))}
        return _answer(result, headers=scopes)

    def _api_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://fake.slack.test/",
            "team": "Fake",
            "user": "agentcomms",
            "team_id": self.team_id,
            "user_id": self.bot_user,
            "bot_id": self.bot_id,
        }

    def _api_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/link?ticket={ticket}"}

    def _channel(self, params: dict[str, Any]) -> str | None:
        channel = str(params.get("channel", ""))
        return channel if channel in self.known else None

    def _api_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params)
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        if "chat:write" not in self.scopes:
            return {"ok": False, "error": "missing_scope", "needed": "chat:write"}
        message: dict[str, Any] = {
            "type": "message",
            "channel": channel,
            "ts": self.new_ts(),
            "user": self.bot_user,
            "bot_id": self.bot_id,
            "text": params.get("text", ""),
            "blocks": _blocks(params.get("blocks")),
        }
        for key in ("thread_ts", "mrkdwn", "parse", "unfurl_links"):
            if key in params:
                message[key] = params[key]
        self.sent.append(message)
        return {"ok": True, "channel": channel, "ts": message["ts"], "message": message}

    def _api_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = self._channel(params), params.get("ts")
        for message in self.sent:
            if message["channel"] == channel and message["ts"] == ts:
                message["text"] = params.get("text", message["text"])
                if "blocks" in params:
                    message["blocks"] = _blocks(params["blocks"])
                self.updates.append(dict(message))
                return {"ok": True, "channel": channel, "ts": ts, "text": message["text"]}
        return {"ok": False, "error": "message_not_found"}

    def _api_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        if self._channel(params) is None:
            return {"ok": False, "error": "channel_not_found"}
        self.ephemerals.append(dict(params))
        return {"ok": True, "message_ts": self.new_ts()}

    def _reaction(self, params: dict[str, Any], action: str) -> dict[str, Any]:
        channel = self._channel(params)
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        self.reactions.append(
            {
                "action": action,
                "name": params.get("name"),
                "channel": channel,
                "timestamp": params.get("timestamp"),
            }
        )
        return {"ok": True}

    def _api_reactions_add(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._reaction(params, "add")

    def _api_reactions_remove(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._reaction(params, "remove")

    def _api_conversations_history(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params)
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        latest = str(params.get("latest") or "9999999999.999999")
        inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")
        found = [
            m
            for m in reversed(self.sent)
            if m["channel"] == channel and (m["ts"] < latest or (inclusive and m["ts"] == latest))
        ]
        return {"ok": True, "messages": found[: int(params.get("limit") or 100)]}

    def _api_files_info(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params.get("file", ""))
        if "files:read" not in self.scopes:
            return {"ok": False, "error": "missing_scope", "needed": "files:read"}
        if file_id not in self._described:
            return {"ok": False, "error": "file_not_found"}
        return {"ok": True, "file": self._described[file_id]}

    def _api_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        if "files:write" not in self.scopes:
            return {"ok": False, "error": "missing_scope", "needed": "files:write"}
        filename, length = str(params.get("filename") or ""), str(params.get("length") or "")
        if not filename or not length.isdigit():
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F9{uuid.uuid4().hex[:8].upper()}"  # the bot's own, apart from people's
        self._uploads[file_id] = {"id": file_id, "name": filename, "length": int(length)}
        return {
            "ok": True,
            "upload_url": f"http://127.0.0.1:{self.port}/upload/v1/{file_id}",
            "file_id": file_id,
        }

    async def _upload(self, request: web.Request) -> web.Response:
        # Slack's upload URL is the key (no token), and takes exactly the length asked for.
        upload = self._uploads.get(request.match_info["upload_id"])
        data = await request.read()
        if upload is None or len(data) != upload["length"]:
            return web.Response(status=400, text="bad upload", content_type="text/plain")
        upload["data"] = data
        return web.Response(text=f"OK - {len(data)}", content_type="text/plain")

    def _api_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            asked = json.loads(str(params.get("files") or ""))
        except ValueError:
            return {"ok": False, "error": "invalid_arguments"}
        channel = str(params.get("channel_id") or "")
        if channel and channel not in self.known:
            return {"ok": False, "error": "channel_not_found"}
        done = []
        for entry in asked:
            upload = self._uploads.get(str(entry.get("id")))
            if upload is None or "data" not in upload:
                return {"ok": False, "error": "file_not_found"}
            self._uploads.pop(upload["id"])
            self.files[upload["id"]] = upload["data"]
            shared = {
                "id": upload["id"],
                "name": upload["name"],
                "title": entry.get("title") or upload["name"],
                "channel": channel or None,
                "thread_ts": params.get("thread_ts") or None,
                "data": upload["data"],
            }
            self.shared.append(shared)
            done.append({"id": upload["id"], "name": upload["name"], "title": shared["title"]})
        return {"ok": True, "files": done}

    async def _file(self, request: web.Request) -> web.Response:
        # Slack serves a file to its workspace's tokens with files:read, and answers others
        # with a page that is not the file; here, a refusal.
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if token != self.bot_token or "files:read" not in self.scopes:
            return web.Response(status=403, text="not allowed")
        file_id = request.match_info["team_file"].rsplit("-", 1)[-1]
        if file_id not in self.files:
            return web.Response(status=404, text="file not found")
        self.downloads.append(file_id)
        return web.Response(body=self.files[file_id], content_type="application/octet-stream")

    # ---- Socket Mode -----------------------------------------------------------------------------

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:  # each URL opens one connection
            return web.Response(status=401, text="invalid ticket")
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._socket = ws
        self.connections += 1
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": 1,
                "debug_info": {"host": "fake-slack", "approximate_connection_time": 3600},
                "connection_info": {"app_id": self.app_id},
            }
        )
        for envelope in list(self._unacked.values()):  # what the last connection left unsaid
            if envelope.get("sent"):
                envelope["retry_attempt"] += 1
                envelope["retry_reason"] = "timeout"
            await ws.send_json({k: v for k, v in envelope.items() if k != "sent"})
            envelope["sent"] = True
        try:
            async for frame in ws:
                if frame.type is not WSMsgType.TEXT:
                    continue
                ack = json.loads(frame.data)
                envelope_id = ack.get("envelope_id")
                if envelope_id in self._unacked:
                    self._unacked.pop(envelope_id)
                    self.acks[envelope_id] = ack
        finally:
            if self._socket is ws:
                self._socket = None
        return ws


def _answer(
    body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


def _blocks(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):  # form-encoded: the blocks as a JSON string
        value = json.loads(value)
    return list(value or [])


def rendered(message: dict[str, Any]) -> str:
    """A message as a person reads it: its blocks' text (or its text, without blocks)."""
    texts = [b["text"]["text"] for b in message.get("blocks", []) if b.get("text")]
    return "\n".join(texts) if texts else str(message.get("text", ""))


def buttons(message: dict[str, Any]) -> list[tuple[str, str]]:
    """A message's buttons, (label, value)."""
    return [
        (e["text"]["text"], e["value"])
        for block in message.get("blocks", [])
        if block.get("type") == "actions"
        for e in block.get("elements", [])
    ]
