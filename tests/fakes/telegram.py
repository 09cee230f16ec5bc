"""A Telegram Bot API server for tests: ``/bot<token>/<method>``, as python-telegram-bot calls it.

Speaks getMe, getUpdates (long polling with offsets: an update stays until a later offset
confirms it), sendMessage, editMessageText, editMessageReplyMarkup, answerCallbackQuery,
setMessageReaction, setWebhook, deleteWebhook, sendDocument (multipart), and getFile with its download URL ``/file/bot<token>/<file_path>`` (refused over 20 MB, as
Telegram does) for voice notes, photos and documents, with Telegram's
answer shapes: ``{"ok": true, "result": …}`` or ``{"ok": false, "error_code", "description",
"parameters": {"retry_after"}}``. A test plays the human (``human_says``), scripts failures
(``fail_next("sendMessage", 429, 500)``) and delays (``hold("sendMessage")``), and reads what
the bot sent (``sent``, ``reactions``) and which files it downloaded (``downloads``).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.serve import LocalServer

# The Bot API serves files up to this size; getFile refuses larger ones.
MAX_DOWNLOAD = 20 * 1024 * 1024
BOT_USER = {"id": 777000111, "is_bot": True, "first_name": "agentcomms", "username": "ac_bot"}
# Values python-telegram-bot sends JSON-encoded; text stays text ("42" is not a number).
_JSON_KEYS = {
    "chat_id",
    "message_id",
    "offset",
    "limit",
    "timeout",
    "allowed_updates",
    "reaction",
    "reply_parameters",
    "drop_pending_updates",
    "is_big",
    "reply_markup",
}


def _error(code: int, description: str, **parameters: Any) -> JSONResponse:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return JSONResponse(body, status_code=code)


class FakeTelegram:
    def __init__(self, token: str = "123456:TEST-token") -> None:
        self.token = token
        self.updates: list[dict[str, Any]] = []  # delivered but not yet confirmed by an offset
        self.sent: list[dict[str, Any]] = []
        self.reactions: list[dict[str, Any]] = []
        self.edits: list[dict[str, Any]] = []  # editMessageText, in order
        self.answered_presses: list[dict[str, Any]] = []  # answerCallbackQuery, in order
        self.markup_edits: list[dict[str, Any]] = []  # editMessageReplyMarkup, in order
        self.calls: list[str] = []
        self.offsets: list[int | None] = []  # each getUpdates' offset, in order
        self.webhook: dict[str, Any] | None = None
        self.known_chats: set[int] = set()
        self.files: dict[str, bytes] = {}  # file_id -> content
        self.downloads: list[str] = []  # the file paths fetched
        self._file_paths: dict[str, str] = {}
        self.documents: list[
            dict[str, Any]
        ] = []  # what the bot sent with sendDocument  # file_id -> the file_path getFile answers
        # None lets a call through: a failure scripted ``after`` calls that succeed.
        self._failures: dict[str, list[JSONResponse | None]] = {}
        self._held: dict[str, asyncio.Event] = {}  # methods answered only once released
        self._next_update_id = 1000
        self._next_message_id = 1
        self._arrived = asyncio.Event()
        app = Starlette(
            routes=[
                Route("/bot{token}/{method}", self._call, methods=["GET", "POST"]),
                Route("/file/bot{token}/{path:path}", self._download, methods=["GET"]),
            ]
        )
        self.server = LocalServer(app)

    # ---- the test's side -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What chat.telegram.base_url is set to (the SDK appends /bot<token>/<method>)."""
        return self.server.url

    def request_for(self, approval: str) -> dict[str, Any] | None:
        """The message that posted approval `approval` (its last piece, under which the buttons
        are), once it was sent."""
        return next((m for m in self.sent if f"approval {approval}" in m["text"]), None)

    def human_says(
        self,
        chat_id: int,
        text: str,
        *,
        user_id: int | None = None,
        first_name: str = "Alice",
        chat_type: str = "private",
    ) -> dict[str, Any]:
        """A person writes to the bot; returns the update Telegram will deliver."""
        user_id = user_id or chat_id
        self.known_chats.add(chat_id)
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name
        else:
            chat["title"] = "a group"
        update = {
            "update_id": self._next_update_id,
            "message": {
                "message_id": self._next_message_id,
                "date": int(time.time()),
                "chat": chat,
                "from": {"id": user_id, "is_bot": False, "first_name": first_name},
                "text": text,
            },
        }
        self._next_update_id += 1
        self._next_message_id += 1
        self.deliver(update)
        return update

    def human_presses(
        self, message: dict[str, Any], data: str, *, user_id: int, first_name: str = "Alice"
    ) -> str:
        """A person presses the button `data` under the bot's `message`; the press's id (its
        answer's ``callback_query_id``)."""
        query_id = f"cq-{self._next_update_id}"
        self.deliver(
            {
                "update_id": self._next_update_id,
                "callback_query": {
                    "id": query_id,
                    "from": {"id": user_id, "is_bot": False, "first_name": first_name},
                    "chat_instance": "1",
                    "message": message,
                    "data": data,
                },
            }
        )
        self._next_update_id += 1
        return query_id

    def human_sends_voice(
        self,
        chat_id: int,
        audio: bytes,
        *,
        duration: int = 2,
        mime_type: str = "audio/ogg",
        user_id: int | None = None,
        first_name: str = "Alice",
        kind: str = "voice",
        file_size: int | None = None,
    ) -> dict[str, Any]:
        """A person records a voice note (``kind="audio"``: sends an audio file)."""
        file_id = f"AwACAgQ-{len(self.files) + 1}"
        self.files[file_id] = audio
        update = self.human_says(chat_id, "", user_id=user_id, first_name=first_name)
        message = update["message"]
        del message["text"]
        message[kind] = {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "duration": duration,
            "mime_type": mime_type,
            "file_size": len(audio) if file_size is None else file_size,
        }
        return update

    def human_sends_file(
        self,
        chat_id: int,
        content: bytes,
        *,
        kind: str = "document",
        caption: str | None = None,
        file_name: str | None = "notes.txt",
        mime_type: str = "text/plain",
        user_id: int | None = None,
        file_size: int | None = None,
    ) -> dict[str, Any]:
        """A person sends a document (``kind="photo"``: a photo, in two sizes as Telegram
        sends one, the small one a thumbnail of other bytes)."""
        file_id = f"BQACAgQ-{len(self.files) + 1}"
        self.files[file_id] = content
        size = len(content) if file_size is None else file_size
        update = self.human_says(chat_id, "", user_id=user_id)
        message = update["message"]
        del message["text"]
        if caption is not None:
            message["caption"] = caption
        if kind == "photo":
            self._file_paths[file_id] = f"photos/file_{file_id}.jpg"
            thumb = f"{file_id}-thumb"
            self.files[thumb] = b"\xff\xd8\xff thumbnail"
            message["photo"] = [
                {"file_id": thumb, "file_unique_id": f"u{thumb}", "width": 90, "height": 90},
                {
                    "file_id": file_id,
                    "file_unique_id": f"u{file_id}",
                    "width": 1280,
                    "height": 960,
                    "file_size": size,
                },
            ]
        else:
            self._file_paths[file_id] = f"documents/file_{file_id}"
            message["document"] = {
                "file_id": file_id,
                "file_unique_id": f"u{file_id}",
                "mime_type": mime_type,
                "file_size": size,
                **({"file_name": file_name} if file_name is not None else {}),
            }
        return update

    def deliver(self, update: dict[str, Any]) -> None:
        """Queue an update for getUpdates (again, for a re-sent one: a new update id)."""
        if any(u["update_id"] == update["update_id"] for u in self.updates):
            update = {**update, "update_id": self._next_update_id}
            self._next_update_id += 1
        self.updates.append(update)
        self._arrived.set()

    def fail_next(
        self,
        method: str,
        *codes: int,
        retry_after: int = 1,
        description: str | None = None,
        after: int = 0,
    ) -> None:
        """The next calls of ``method`` fail with these HTTP codes, in order (429: flood control),
        once ``after`` calls have gone through; ``description`` replaces "Internal Server
        Error" in the 5xx answers."""
        self._failures.setdefault(method, []).extend([None] * after)
        for code in codes:
            if code == 429:
                response = _error(
                    429, f"Too Many Requests: retry after {retry_after}", retry_after=retry_after
                )
            elif code == 403:
                response = _error(403, "Forbidden: bot was blocked by the user")
            elif code == 400:
                response = _error(400, "Bad Request: chat not found")
            else:
                response = _error(code, description or "Internal Server Error")
            self._failures.setdefault(method, []).append(response)

    def hold(self, method: str) -> asyncio.Event:
        """Calls of ``method`` wait (their work done, their answer not given) until the event
        returned is set: a slow Telegram."""
        self._held[method] = asyncio.Event()
        return self._held[method]

    def documents_to(self, chat_id: int) -> list[tuple[str, bytes]]:
        """The files the bot sent the chat: (file name, content)."""
        return [
            (m["document"]["file_name"], self.files[m["document"]["file_id"]])
            for m in self.documents
            if m["chat"]["id"] == chat_id
        ]

    def texts_to(self, chat_id: int) -> list[str]:
        return [m["text"] for m in self.sent if m["chat"]["id"] == chat_id]

    # ---- the Bot API ---------------------------------------------------------------------------

    async def _call(self, request: Request) -> JSONResponse:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.path_params["method"]
        self.calls.append(method)
        if self._failures.get(method) and (failure := self._failures[method].pop(0)):
            return failure
        params = await self._params(request)
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        result = await handler(params)
        if method in self._held:
            await self._held[method].wait()
        if isinstance(result, JSONResponse):
            return result
        return JSONResponse({"ok": True, "result": result})

    @staticmethod
    async def _params(request: Request) -> dict[str, Any]:
        if request.headers.get("content-type", "").startswith("application/json"):
            data: dict[str, Any] = await request.json()
            return data
        params: dict[str, Any] = {}
        uploads: dict[str, tuple[str, bytes]] = {}
        async with request.form() as form:  # closed: an uploaded part is a temporary file
            for key, value in form.items():
                if isinstance(value, UploadFile):  # a file, as multipart/form-data carries it
                    uploads[key] = (value.filename or "", await value.read())
                    continue
                text = str(value)
                params[key] = json.loads(text) if key in _JSON_KEYS else text
        for key, value in list(params.items()):  # "attach://<part>" names an uploaded part
            if isinstance(value, str) and value.startswith("attach://"):
                params[key] = uploads.pop(value.removeprefix("attach://"))
        return {**params, **uploads}

    async def _api_getMe(self, params: dict[str, Any]) -> Any:
        return {**BOT_USER, "can_join_groups": True, "can_read_all_group_messages": False}

    async def _api_deleteWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = None
        return True

    async def _api_setWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = params
        return True

    async def _api_getUpdates(self, params: dict[str, Any]) -> Any:
        if self.webhook is not None:
            return _error(409, "Conflict: can't use getUpdates method while webhook is active")
        offset = params.get("offset")
        self.offsets.append(offset)
        if offset is not None:  # confirms every update before it
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        while not self.updates and (remaining := deadline - time.monotonic()) > 0:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                break
        return self.updates[: int(params.get("limit") or 100)]

    async def _api_sendMessage(self, params: dict[str, Any]) -> Any:
        chat_id = int(params["chat_id"])
        if chat_id not in self.known_chats:
            return _error(400, "Bad Request: chat not found")
        message = {
            "message_id": self._next_message_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private"},
            "from": BOT_USER,
            "text": params["text"],
        }
        if "reply_parameters" in params:
            message["reply_to_message_id"] = params["reply_parameters"]["message_id"]
        if "reply_markup" in params:
            message["reply_markup"] = params["reply_markup"]
        self._next_message_id += 1
        self.sent.append(message)
        return message

    async def _api_sendDocument(self, params: dict[str, Any]) -> Any:
        chat_id = int(params["chat_id"])
        if chat_id not in self.known_chats:
            return _error(400, "Bad Request: chat not found")
        document = params.get("document")
        if not isinstance(document, tuple):
            return _error(400, "Bad Request: there is no document in the request")
        file_name, content = document
        file_id = f"BQACAgQ-sent-{len(self.files) + 1}"
        self.files[file_id] = content
        message = {
            "message_id": self._next_message_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private"},
            "from": BOT_USER,
            "document": {
                "file_id": file_id,
                "file_unique_id": f"u{file_id}",
                "file_name": file_name,
                "file_size": len(content),
            },
        }
        self._next_message_id += 1
        self.documents.append(message)
        return message

    async def _api_editMessageText(self, params: dict[str, Any]) -> Any:
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        for message in self.sent:
            if message["chat"]["id"] == chat_id and message["message_id"] == message_id:
                message["text"] = params["text"]
                message.pop("reply_markup", None)  # no markup given: the buttons go
                self.edits.append({"chat_id": chat_id, "message_id": message_id, **params})
                return message
        return _error(400, "Bad Request: message to edit not found")

    async def _api_editMessageReplyMarkup(self, params: dict[str, Any]) -> Any:
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        for message in self.sent:
            if message["chat"]["id"] == chat_id and message["message_id"] == message_id:
                if "reply_markup" in params:
                    message["reply_markup"] = params["reply_markup"]
                else:
                    message.pop("reply_markup", None)
                self.markup_edits.append({"chat_id": chat_id, "message_id": message_id, **params})
                return message
        return _error(400, "Bad Request: message to edit not found")

    async def _api_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        self.answered_presses.append(params)
        return True

    async def _api_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id"))
        content = self.files.get(file_id)
        if content is None:
            return _error(400, "Bad Request: invalid file_id")
        if len(content) > MAX_DOWNLOAD:
            return _error(400, "Bad Request: file is too big")
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": len(content),
            "file_path": self._file_paths.get(file_id, f"voice/{file_id}.oga"),
        }

    async def _download(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return Response("Unauthorized", status_code=401)
        path = request.path_params["path"]
        by_path = {p: f for f, p in self._file_paths.items()}
        file_id = by_path.get(path) or path.removeprefix("voice/").removesuffix(".oga")
        if file_id not in self.files:
            return Response("Not Found", status_code=404)
        self.downloads.append(path)
        return Response(self.files[file_id], media_type="application/octet-stream")

    async def _api_setMessageReaction(self, params: dict[str, Any]) -> Any:
        self.reactions.append(
            {
                "chat_id": int(params["chat_id"]),
                "message_id": int(params["message_id"]),
                "emoji": [r["emoji"] for r in params.get("reaction") or []],
            }
        )
        return True
