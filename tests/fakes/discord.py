"""Discord for tests: its REST API (``/api/v10/…``) and its gateway WebSocket, as discord.py uses them.

REST: ``GET /gateway/bot`` (where the gateway is), ``GET /users/@me`` and
``GET /oauth2/applications/@me`` (login), ``GET /channels/{id}`` and ``GET
/channels/{id}/messages?after=`` (a channel's history), ``POST /channels/{id}/messages`` (send,
replies as ``message_reference``, buttons as ``components``, files as multipart form data),
``PATCH /channels/{id}/messages/{id}`` (an edit), ``PUT``/``DELETE`` ``…/reactions/{emoji}/@me``, and an interaction's answers: ``POST
/interactions/{id}/{token}/callback`` (refused past Discord's 3 s, as Discord does), ``PATCH
/webhooks/{application}/{token}/messages/@original`` (the deferred reply, or, after a deferred
update of a press's message, that message itself) and ``POST /webhooks/{application}/{token}`` (a
followup, ephemeral or not, once the interaction was acknowledged). Answers have Discord's
shapes: JSON objects, errors as ``{"message", "code"}``, 429s with ``retry_after`` and the ``Via``
header Discord's edge adds (discord.py takes a 429 without it for a Cloudflare ban).

Gateway (plain JSON text frames; discord.py asks for zlib but reads text as it comes): HELLO
(op 10), IDENTIFY (op 2) answered by READY and a GUILD_CREATE, heartbeats (op 1 → op 11), RESUME
(op 6) replaying what the session missed then RESUMED, or INVALID_SESSION (op 9), and
INTERACTION_CREATE when a human presses a button (whatever the intents, as Discord). Dispatches
follow the intents IDENTIFY asked for, as Discord's do: no guild messages without
GUILD_MESSAGES, empty guild message content without MESSAGE_CONTENT, and close code 4014 when
the bot asks for a privileged intent the developer portal has not enabled.

A test plays the humans (``human_says``, ``human_presses``), scripts failures (``fail_next``),
takes Discord away and back (``stop``/``start``, same port), and reads what the bot did
(``sent``, ``edits``, ``attached_to``, ``reactions``, ``interaction_answers``, ``requests``,
``identifies``, ``resumes``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from aiohttp import WSMsgType, web

from tests.fakes.serve import free_port

DISCORD_EPOCH_MS = 1_420_070_400_000
# Discord's markdown escape: a backslash and any character but a letter, digit or space.
ESCAPED = re.compile(r"\\([^0-9A-Za-z\s])")
GUILDS = 1 << 0
GUILD_MESSAGES = 1 << 9
DIRECT_MESSAGES = 1 << 12
MESSAGE_CONTENT = 1 << 15
PRIVILEGED = MESSAGE_CONTENT | (1 << 1) | (1 << 8)  # content, members, presences
GUILD_TEXT, DM = 0, 1
SEND = "POST /channels/{channel_id}/messages"
EDIT = "PATCH /channels/{channel_id}/messages/{message_id}"
COMPONENT = 3  # an interaction's type: a press on a message component
# Discord forgets an interaction that was not acknowledged within this long.
INTERACTION_ANSWER_S = 3.0
EPHEMERAL = 1 << 6
# The callback type that acknowledges a press as an update of the pressed message (no reply).
DEFERRED_UPDATE = 6
REACT = "PUT /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me"
_ERRORS = {
    400: (50035, "Invalid Form Body"),
    401: (0, "401: Unauthorized"),
    403: (50013, "Missing Permissions"),
    404: (10003, "Unknown Channel"),
    500: (0, "500: Internal Server Error"),
    502: (0, "502: Bad Gateway"),
}


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # discord.py parses a body as JSON only when Content-Type is exactly application/json.
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class _Session:
    id: str
    intents: int
    seq: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)  # every dispatch, for RESUME
    ws: web.WebSocketResponse | None = None
    # Dispatches leave in sequence order through one writer per connection.
    outgoing: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)


class FakeDiscord:
    def __init__(self, *, token: str = "fake.discord.bot-token", guild_id: int = 1110001) -> None:
        self.token = token
        self.guild_id = guild_id
        self.port = free_port()
        self._ids = itertools.count(1)
        self.bot_user = self._user(self.snowflake(), "agentcomms", bot=True)
        self.application_id = self.snowflake()
        self.channels: dict[int, dict[str, Any]] = {}
        self.forbidden: set[int] = set()  # channels the bot may see but not write in
        self.privileged_intents_enabled = True  # the developer portal's switches
        self.sent: list[dict[str, Any]] = []  # messages the bot posted (as they are now)
        self.edits: list[dict[str, Any]] = []  # each edit the bot made: the message after it
        # Each answer to an interaction: its callback ({"interaction", "type", "flags"}), the
        # edit of its deferred reply ({"interaction", "content"}) or of the pressed message
        # after a deferred update ({"interaction", "content", "edited"}), or a followup
        # ({"interaction", "content", "flags", "followup": True}).
        self.interaction_answers: list[dict[str, Any]] = []
        self._interactions: dict[str, tuple[float, dict[str, Any]]] = {}  # by token
        self.reactions: list[dict[str, Any]] = []  # what the bot reacted, and took back
        self.files: dict[str, bytes] = {}  # what the bot or a human attached, by attachment id
        self.downloads: list[str] = []  # the file names fetched from the CDN
        self.requests: list[tuple[float, str]] = []  # (monotonic time, "METHOD route")
        self.history: dict[int, list[dict[str, Any]]] = {}  # every channel's messages, oldest first
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self._failures: dict[str, list[int]] = {}
        self._retry_after: dict[str, float] = {}
        self._sessions: dict[str, _Session] = {}
        self._session: _Session | None = None  # the bot's current session
        self._runner: web.AppRunner | None = None
        self.general = self.text_channel()  # a channel in the bot's guild

    # ---- the test's side -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What chat.discord.base_url is set to (discord.py's routes go under /api/v10)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    def snowflake(self) -> int:
        """A Discord id: milliseconds since Discord's epoch, then a counter (ids sort by time)."""
        ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
        return (ms << 22) | (next(self._ids) & 0xFFF)

    def text_channel(self, guild_id: int | None = None) -> int:
        channel_id = self.snowflake()
        self.channels[channel_id] = {
            "id": str(channel_id),
            "type": GUILD_TEXT,
            "guild_id": str(guild_id or self.guild_id),
            "name": f"general-{channel_id % 1000}",
            "position": len(self.channels),
            "permission_overwrites": [],
        }
        return channel_id

    def dm_channel(self, user_id: int) -> int:
        channel_id = self.snowflake()
        recipient = self._user(user_id, f"user{user_id}")
        self.channels[channel_id] = {"id": str(channel_id), "type": DM, "recipients": [recipient]}
        return channel_id

    def request_for(self, approval: str) -> dict[str, Any] | None:
        """The message that posted approval `approval`, once it was sent."""
        return next((m for m in self.sent if f"approval {approval}" in m["content"]), None)

    @staticmethod
    def rendered(message: dict[str, Any]) -> str:
        """What a person reads of a message's content as far as escapes go: Discord's client
        shows a backslash before a mark that is neither a letter, a digit nor a space as the
        mark itself, never as markdown."""
        return ESCAPED.sub(r"\1", str(message["content"]))

    def human_says(
        self,
        channel_id: int,
        text: str,
        *,
        user_id: int = 4242,
        name: str = "Alice",
        bot: bool = False,
        reply_to: int | None = None,
    ) -> dict[str, Any]:
        """Someone writes in a channel; returns the MESSAGE_CREATE payload Discord dispatches."""
        channel = self.channels[channel_id]
        message = self._message(
            channel_id, text, self._user(user_id, name.lower(), name, bot=bot), reply_to
        )
        if "guild_id" in channel:
            message["guild_id"] = channel["guild_id"]
            message["member"] = {"roles": [], "joined_at": _now(), "deaf": False, "mute": False}
        self.deliver(message)
        return message

    def human_sends_file(
        self,
        channel_id: int,
        filename: str,
        content: bytes,
        *,
        text: str = "",
        content_type: str | None = None,
        user_id: int = 4242,
        name: str = "Alice",
    ) -> dict[str, Any]:
        """Someone attaches a file (with ``text``, maybe none); Discord serves it from its CDN,
        here ``/attachments/<channel>/<id>/<filename>``."""
        attachment_id = str(self.snowflake())
        self.files[attachment_id] = content
        url = f"{self.base_url}/attachments/{channel_id}/{attachment_id}/{filename}"
        attached = {
            "id": attachment_id,
            "filename": filename,
            "size": len(content),
            "url": url,
            "proxy_url": url,
            **({"content_type": content_type} if content_type else {}),
        }
        channel = self.channels[channel_id]
        message = self._message(
            channel_id, text, self._user(user_id, name.lower(), name, bot=False), None
        )
        message["attachments"].append(attached)
        if "guild_id" in channel:
            message["guild_id"] = channel["guild_id"]
            message["member"] = {"roles": [], "joined_at": _now(), "deaf": False, "mute": False}
        self.deliver(message)
        return message

    def bot_says(self, channel_id: int, text: str) -> dict[str, Any]:
        """The bot's own message, as Discord echoes it on the gateway."""
        message = self._message(channel_id, text, self.bot_user, None)
        if "guild_id" in self.channels[channel_id]:
            message["guild_id"] = self.channels[channel_id]["guild_id"]
        self.deliver(message)
        return message

    def human_presses(
        self,
        message: dict[str, Any],
        custom_id: str,
        *,
        user_id: int = 4242,
        name: str = "Alice",
        application_id: int | None = None,
    ) -> dict[str, Any]:
        """Someone presses a button under ``message``; returns the INTERACTION_CREATE payload.
        ``application_id`` other than the bot's is an interaction meant for another app."""
        session = self._session
        if session is None:
            raise RuntimeError("no bot is connected to the gateway")
        channel_id = int(message["channel_id"])
        channel = self.channels[channel_id]
        user = self._user(user_id, name.lower(), name)
        token = f"interaction-token-{uuid.uuid4().hex}"
        current = next((m for m in self.sent if m["id"] == message["id"]), message)
        interaction: dict[str, Any] = {
            "id": str(self.snowflake()),
            "application_id": str(application_id or self.application_id),
            "type": COMPONENT,
            "data": {"custom_id": custom_id, "component_type": 2},
            "channel_id": str(channel_id),
            "channel": channel,
            "token": token,
            "version": 1,
            "message": current,
            "locale": "en-US",
            "app_permissions": "0",
            "entitlements": [],
            "authorizing_integration_owners": {},
            "attachment_size_limit": 8 * 1024 * 1024,
        }
        if "guild_id" in channel:
            interaction["guild_id"] = channel["guild_id"]
            interaction["guild_locale"] = "en-US"
            interaction["member"] = {
                "user": user,
                "roles": [],
                "joined_at": _now(),
                "deaf": False,
                "mute": False,
                "flags": 0,
                "nick": None,
                "avatar": None,
                "permissions": "0",
            }
        else:
            interaction["user"] = user
        self._interactions[token] = (time.monotonic(), interaction)
        self._dispatch(session, "INTERACTION_CREATE", interaction)
        return interaction

    def answers_to(self, interaction: dict[str, Any]) -> list[dict[str, Any]]:
        return [a for a in self.interaction_answers if a["interaction"] == interaction["id"]]

    def deliver(self, message: dict[str, Any]) -> None:
        """Dispatch MESSAGE_CREATE to the bot's session (again, for a message seen before)."""
        session = self._session
        if session is None:
            raise RuntimeError("no bot is connected to the gateway")
        guild = "guild_id" in message
        if not session.intents & (GUILD_MESSAGES if guild else DIRECT_MESSAGES):
            return
        if guild and not session.intents & MESSAGE_CONTENT:
            message = {**message, "content": ""}
        self._dispatch(session, "MESSAGE_CREATE", message)

    def fail_next(self, route: str, *codes: int, retry_after: float = 1.0) -> None:
        """The next calls of ``route`` (e.g. :data:`SEND`) fail with these HTTP codes, in order."""
        self._failures.setdefault(route, []).extend(codes)
        self._retry_after[route] = retry_after

    def attached_to(self, message: dict[str, Any]) -> list[tuple[str, bytes]]:
        """The files the bot attached to a message it posted: (file name, content)."""
        return [(a["filename"], self.files[a["id"]]) for a in message["attachments"]]

    def texts_to(self, channel_id: int) -> list[str]:
        return [m["content"] for m in self.sent if m["channel_id"] == str(channel_id)]

    def count(self, route: str) -> int:
        return sum(1 for _, r in self.requests if r == route)

    def connected(self) -> bool:
        return self._session is not None and self._session.ws is not None

    async def start(self) -> None:
        app = web.Application()
        api = "/api/v10"
        app.router.add_get(f"{api}/gateway/bot", self._gateway_bot)
        app.router.add_get("/attachments/{channel_id}/{id}/{filename}", self._cdn)
        app.router.add_get(f"{api}/gateway", self._gateway)
        app.router.add_get(f"{api}/users/@me", self._me)
        app.router.add_get(f"{api}/oauth2/applications/@me", self._application)
        app.router.add_get(f"{api}/channels/{{channel_id}}", self._get_channel)
        app.router.add_get(f"{api}/channels/{{channel_id}}/messages", self._read)
        app.router.add_post(f"{api}/channels/{{channel_id}}/messages", self._send)
        app.router.add_patch(f"{api}/channels/{{channel_id}}/messages/{{message_id}}", self._edit)
        app.router.add_post(f"{api}/interactions/{{id}}/{{token}}/callback", self._callback)
        original = f"{api}/webhooks/{{application_id}}/{{token}}/messages/@original"
        app.router.add_patch(original, self._edit_original)
        app.router.add_post(f"{api}/webhooks/{{application_id}}/{{token}}", self._followup)
        reaction = f"{api}/channels/{{channel_id}}/messages/{{message_id}}/reactions/{{emoji}}/@me"
        app.router.add_put(reaction, self._react)
        app.router.add_delete(reaction, self._unreact)
        app.router.add_get("/gateway", self._websocket)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        """Discord goes away: the gateway connection drops, REST refuses connections."""
        if self._runner is None:
            return
        for session in self._sessions.values():
            if session.ws is not None:
                await session.ws.close(code=1001, message=b"going away")
                session.ws = None
        await self._runner.cleanup()
        self._runner = None

    # ---- REST ----------------------------------------------------------------------------------

    def _check(self, request: web.Request, route: str) -> web.Response | None:
        """Authentication and scripted failures, as Discord answers them; None: go on."""
        self.requests.append((time.monotonic(), route))
        if request.headers.get("Authorization") != f"Bot {self.token}":
            return self._error(401)
        if self._failures.get(route):
            return self._error(self._failures[route].pop(0), self._retry_after.get(route, 1.0))
        return None

    @staticmethod
    def _error(status: int, retry_after: float = 1.0) -> web.Response:
        if status == 429:
            return _json(
                {
                    "message": "You are being rate limited.",
                    "retry_after": retry_after,
                    "global": False,
                    "code": 0,
                },
                429,
                {"Via": "1.1 google", "Retry-After": str(int(retry_after) or 1)},
            )
        code, message = _ERRORS.get(status, (0, f"{status}: error"))
        return _json({"message": message, "code": code}, status)

    async def _gateway(self, request: web.Request) -> web.Response:
        self.requests.append((time.monotonic(), "GET /gateway"))
        return _json({"url": self.gateway_url})

    async def _gateway_bot(self, request: web.Request) -> web.Response:
        if failed := self._check(request, "GET /gateway/bot"):
            return failed
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return _json({"url": self.gateway_url, "shards": 1, "session_start_limit": limit})

    async def _me(self, request: web.Request) -> web.Response:
        return self._check(request, "GET /users/@me") or _json(self.bot_user)

    async def _application(self, request: web.Request) -> web.Response:
        if failed := self._check(request, "GET /oauth2/applications/@me"):
            return failed
        return _json(
            {
                "id": str(self.application_id),
                "name": "agentcomms",
                "description": "",
                "icon": None,
                "bot_public": False,
                "bot_require_code_grant": False,
                "owner": self._user(self.snowflake(), "operator"),
                "verify_key": "0" * 64,
                "flags": 0,
            }
        )

    def _channel(self, request: web.Request) -> tuple[int, web.Response | None]:
        channel_id = int(request.match_info["channel_id"])
        if channel_id not in self.channels:
            return channel_id, self._error(404)
        if channel_id in self.forbidden:
            return channel_id, self._error(403)
        return channel_id, None

    async def _get_channel(self, request: web.Request) -> web.Response:
        if failed := self._check(request, "GET /channels/{channel_id}"):
            return failed
        channel_id, refused = self._channel(request)
        return refused or _json(self.channels[channel_id])

    async def _read(self, request: web.Request) -> web.Response:
        """A channel's messages after ``after``: the ``limit`` oldest of them, newest first."""
        if failed := self._check(request, "GET /channels/{channel_id}/messages"):
            return failed
        channel_id, refused = self._channel(request)
        if refused:
            return refused
        after = int(request.query.get("after", 0))
        limit = int(request.query.get("limit", 50))
        later = [m for m in self.history.get(channel_id, []) if int(m["id"]) > after][:limit]
        return _json(list(reversed(later)))

    async def _cdn(self, request: web.Request) -> web.Response:
        """A file from Discord's CDN: its URL is the only key (no token), as Discord's was."""
        content = self.files.get(request.match_info["id"])
        if content is None:
            return web.Response(status=404, text="Not Found")
        self.downloads.append(request.match_info["filename"])
        return web.Response(body=content, content_type="application/octet-stream")

    async def _send(self, request: web.Request) -> web.Response:
        if failed := self._check(request, SEND):
            return failed
        channel_id, refused = self._channel(request)
        if refused:
            return refused
        body, files = await self._message_body(request)
        content = body.get("content") or ""
        if (not content and not files) or len(content) > 2000:  # a file may go without words
            return _json(
                {
                    "message": "Invalid Form Body",
                    "code": 50035,
                    "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}},
                },
                400,
            )
        reference = body.get("message_reference")
        message = self._message(
            channel_id,
            content,
            self.bot_user,
            int(reference["message_id"]) if reference else None,
        )
        if guild := self.channels[channel_id].get("guild_id"):
            message["guild_id"] = guild
        if body.get("components"):
            message["components"] = body["components"]
        for filename, data in files:
            attachment_id = str(self.snowflake())
            self.files[attachment_id] = data
            message["attachments"].append(
                {
                    "id": attachment_id,
                    "filename": filename,
                    "size": len(data),
                    "url": "",
                    "proxy_url": "",
                }
            )
        self.sent.append({**message, "allowed_mentions": body.get("allowed_mentions")})
        return _json(message)

    @staticmethod
    async def _message_body(request: web.Request) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
        """A message's JSON, and its files: with files, discord.py posts multipart form data,
        the JSON in ``payload_json`` and each file in ``files[n]``, as Discord takes them."""
        if not request.content_type.startswith("multipart/"):
            return await request.json(), []
        form = await request.post()
        body = json.loads(str(form["payload_json"]))
        files = [
            (value.filename, value.file.read())
            for key, value in form.items()
            if key.startswith("files[") and isinstance(value, web.FileField)
        ]
        return body, files

    async def _edit(self, request: web.Request) -> web.Response:
        if failed := self._check(request, EDIT):
            return failed
        channel_id, refused = self._channel(request)
        if refused:
            return refused
        message_id = request.match_info["message_id"]
        message = next(
            (m for m in self.sent if m["id"] == message_id and m["channel_id"] == str(channel_id)),
            None,
        )
        if message is None:
            return _json({"message": "Unknown Message", "code": 10008}, 404)
        body = await request.json()
        if "content" in body:
            message["content"] = body["content"] or ""
        if "components" in body:
            message["components"] = body["components"]
        message["edited_timestamp"] = _now()
        self.edits.append(dict(message))
        return _json(message)

    async def _callback(self, request: web.Request) -> web.Response:
        """An interaction's first answer: Discord takes it only within 3 s, and only once."""
        self.requests.append((time.monotonic(), "POST /interactions/{id}/{token}/callback"))
        known = self._interactions.get(request.match_info["token"])
        if known is None or known[1]["id"] != request.match_info["id"]:
            return _json({"message": "Unknown interaction", "code": 10062}, 404)
        created, interaction = known
        if time.monotonic() - created > INTERACTION_ANSWER_S:
            return _json({"message": "Unknown interaction", "code": 10062}, 404)
        if any(a.get("type") for a in self.answers_to(interaction)):
            return _json(
                {"message": "Interaction has already been acknowledged.", "code": 40060}, 400
            )
        body = await request.json()
        kind = int(body["type"])
        flags = int((body.get("data") or {}).get("flags") or 0)
        self.interaction_answers.append(
            {"interaction": interaction["id"], "type": kind, "flags": flags}
        )
        return _json(
            {
                "interaction": {
                    "id": interaction["id"],
                    "type": interaction["type"],
                    "response_message_loading": kind == 5,
                    "response_message_ephemeral": bool(flags & EPHEMERAL),
                },
                "resource": {"type": kind},
            }
        )

    async def _edit_original(self, request: web.Request) -> web.Response:
        """The deferred reply to an interaction, written (within the token's 15 minutes)."""
        self.requests.append((time.monotonic(), "PATCH /webhooks/{id}/{token}/messages/@original"))
        known = self._interactions.get(request.match_info["token"])
        if known is None or request.match_info["application_id"] != str(self.application_id):
            return _json({"message": "Unknown Webhook", "code": 10015}, 404)
        _, interaction = known
        answers = self.answers_to(interaction)
        if not answers:
            return _json({"message": "Unknown Message", "code": 10008}, 404)
        body = await request.json()
        if answers[0]["type"] == DEFERRED_UPDATE:
            # The original response to a press acknowledged as an update is the pressed message.
            pressed = next(m for m in self.sent if m["id"] == interaction["message"]["id"])
            if "content" in body:
                pressed["content"] = body["content"] or ""
            if "components" in body:
                pressed["components"] = body["components"]
            pressed["edited_timestamp"] = _now()
            self.edits.append(dict(pressed))
            self.interaction_answers.append(
                {"interaction": interaction["id"], "content": body.get("content"), "edited": True}
            )
            return _json(pressed)
        self.interaction_answers.append(
            {"interaction": interaction["id"], "content": body.get("content")}
        )
        channel_id = int(interaction["channel_id"])
        reply = self._message(channel_id, body.get("content") or "", self.bot_user, None)
        self.history[channel_id].remove(reply)  # seen by the presser alone, never in the channel
        return _json({**reply, "flags": EPHEMERAL, "webhook_id": str(self.application_id)})

    async def _followup(self, request: web.Request) -> web.Response:
        """A followup message to an interaction: only once it was acknowledged (until then
        Discord knows no webhook by its token); an ephemeral one is seen by the presser alone."""
        self.requests.append((time.monotonic(), "POST /webhooks/{id}/{token}"))
        known = self._interactions.get(request.match_info["token"])
        if known is None or request.match_info["application_id"] != str(self.application_id):
            return _json({"message": "Unknown Webhook", "code": 10015}, 404)
        _, interaction = known
        if not self.answers_to(interaction):
            return _json({"message": "Unknown Webhook", "code": 10015}, 404)
        body, _ = await self._message_body(request)
        flags = int(body.get("flags") or 0)
        content = body.get("content") or ""
        self.interaction_answers.append(
            {"interaction": interaction["id"], "content": content, "flags": flags, "followup": True}
        )
        channel_id = int(interaction["channel_id"])
        message = self._message(channel_id, content, self.bot_user, None)
        if flags & EPHEMERAL:
            self.history[channel_id].remove(message)  # never in the channel
        message.update(
            flags=flags,
            webhook_id=str(self.application_id),
            application_id=str(self.application_id),
            type=0,
        )
        return _json(message)

    async def _react(self, request: web.Request) -> web.Response:
        if failed := self._check(request, REACT):
            return failed
        return self._reaction(request, "add")

    async def _unreact(self, request: web.Request) -> web.Response:
        return self._check(request, "DELETE " + REACT[4:]) or self._reaction(request, "remove")

    def _reaction(self, request: web.Request, action: str) -> web.Response:
        channel_id, refused = self._channel(request)
        if refused:
            return refused
        self.reactions.append(
            {
                "channel_id": channel_id,
                "message_id": int(request.match_info["message_id"]),
                "emoji": unquote(request.match_info["emoji"]),
                "action": action,
            }
        )
        return web.Response(status=204)

    # ---- the gateway ----------------------------------------------------------------------------

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.requests.append((time.monotonic(), "GATEWAY " + request.query_string))
        await ws.send_json({"op": 10, "d": {"heartbeat_interval": 41250}, "s": None, "t": None})
        session: _Session | None = None
        writer: asyncio.Task[None] | None = None
        try:
            async for frame in ws:
                if frame.type is not WSMsgType.TEXT:
                    continue
                payload = json.loads(frame.data)
                op, data = payload.get("op"), payload.get("d")
                if op == 1:
                    await ws.send_json({"op": 11, "d": None, "s": None, "t": None})
                elif op in (2, 6) and writer is None:
                    session = await (self._identify if op == 2 else self._resume)(ws, data)
                    if session is not None:
                        writer = asyncio.create_task(self._write(ws, session.outgoing))
        finally:
            if writer is not None:
                writer.cancel()
            if session is not None and session.ws is ws:
                session.ws = None
        return ws

    @staticmethod
    async def _write(ws: web.WebSocketResponse, frames: asyncio.Queue[dict[str, Any]]) -> None:
        while not ws.closed:
            await ws.send_json(await frames.get())

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> _Session | None:
        self.identifies.append(data)
        if data.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return None
        intents = int(data.get("intents") or 0)
        if intents & PRIVILEGED and not self.privileged_intents_enabled:
            await ws.close(code=4014, message=b"Disallowed intent(s).")
            return None
        session = _Session(id=uuid.uuid4().hex, intents=intents, ws=ws)
        self._sessions[session.id] = self._session = session
        guilds = [{"id": str(self.guild_id), "unavailable": True}] if intents & GUILDS else []
        ready = {
            "v": 10,
            "user": self.bot_user,
            "guilds": guilds,
            "session_id": session.id,
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(self.application_id), "flags": 0},
            "private_channels": [],
            "relationships": [],
        }
        self._dispatch(session, "READY", ready)
        if guilds:
            self._dispatch(session, "GUILD_CREATE", self._guild())
        return session

    async def _resume(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> _Session | None:
        self.resumes.append(data)
        session = self._sessions.get(data.get("session_id") or "")
        if session is None or data.get("token") != self.token:
            await ws.send_json({"op": 9, "d": False, "s": None, "t": None})
            return None
        session.ws = ws
        session.outgoing = asyncio.Queue()  # what the dropped connection did not send is replayed
        for missed in session.sent:
            if missed["s"] > int(data.get("seq") or 0):
                session.outgoing.put_nowait(missed)
        self._dispatch(session, "RESUMED", {})
        return session

    def _dispatch(self, session: _Session, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.sent.append(frame)
        if session.ws is not None:
            session.outgoing.put_nowait(frame)

    # ---- shapes ----------------------------------------------------------------------------------

    @staticmethod
    def _user(
        user_id: int, username: str, global_name: str | None = None, *, bot: bool = False
    ) -> dict[str, Any]:
        user: dict[str, Any] = {
            "id": str(user_id),
            "username": username,
            "global_name": global_name,
            "discriminator": "0",
            "avatar": None,
        }
        if bot:
            user["bot"] = True
        return user

    def _message(
        self, channel_id: int, content: str, author: dict[str, Any], reply_to: int | None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "id": str(self.snowflake()),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 19 if reply_to else 0,  # REPLY or DEFAULT
            "flags": 0,
        }
        self.history.setdefault(channel_id, []).append(message)
        if reply_to:
            message["message_reference"] = {
                "message_id": str(reply_to),
                "channel_id": str(channel_id),
                "type": 0,
            }
        return message

    def _guild(self) -> dict[str, Any]:
        return {
            "id": str(self.guild_id),
            "name": "agents",
            "icon": None,
            "owner_id": str(self.snowflake()),
            "roles": [],
            "emojis": [],
            "stickers": [],
            "features": [],
            "channels": [
                c for c in self.channels.values() if c.get("guild_id") == str(self.guild_id)
            ],
            "threads": [],
            "members": [],
            "voice_states": [],
            "presences": [],
            "member_count": 2,
            "large": False,
            "unavailable": False,
            "joined_at": _now(),
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "system_channel_flags": 0,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
        }
