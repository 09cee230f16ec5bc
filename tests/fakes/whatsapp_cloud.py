"""The WhatsApp Business Cloud API for tests: the Graph API messages endpoint our sender posts to
(``/{version}/{phone_number_id}/messages``, bearer token, Meta's error bodies), and a human whose
messages arrive as webhook calls signed exactly as Meta signs them (``X-Hub-Signature-256``:
``sha256=`` + HMAC-SHA256 of the raw body with the app secret). A voice note's media is served
as Meta serves it: ``GET /{version}/{media-id}`` gives its URL, type and size, and that URL
gives the bytes; both want the bearer token."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.serve import LocalServer

PHONE_NUMBER_ID = "106540352242922"
ACCESS_TOKEN = "EAAGm0PX4ZCpsBA-test-access-token"
APP_SECRET = "meta-test-app-secret"
VERIFY_TOKEN = "meta-test-verify-token"
OUR_NUMBER = "15550000000"  # as Meta shows it: digits, no "+"


def new_wamid() -> str:
    return "wamid.HBgL" + secrets.token_hex(12).upper()


def graph_error(
    status: int, code: int, message: str, *, details: str | None = None, subcode: int | None = None
) -> JSONResponse:
    """An error as the Graph API answers it."""
    error: dict[str, Any] = {
        "message": message,
        "type": "OAuthException",
        "code": code,
        "fbtrace_id": "A" + secrets.token_hex(8),
    }
    if details:
        error["error_data"] = {"messaging_product": "whatsapp", "details": details}
    if subcode is not None:
        error["error_subcode"] = subcode
    return JSONResponse({"error": error}, status_code=status)


class FakeWhatsAppCloud:
    def __init__(
        self,
        *,
        phone_number_id: str = PHONE_NUMBER_ID,
        access_token: str = ACCESS_TOKEN,
        app_secret: str = APP_SECRET,
    ) -> None:
        self.phone_number_id = phone_number_id
        self.access_token = access_token
        self.app_secret = app_secret
        self.sent: list[dict[str, Any]] = []  # request bodies accepted, in order, with their "id"
        self.calls = 0
        self.media: dict[str, tuple[bytes, str]] = {}  # media id -> (content, mime type)
        self.media_asked: list[str] = []  # media ids looked up
        self.downloads: list[str] = []  # media ids whose bytes were fetched
        self.fail_media = False  # media lookups answer 500 (Meta's "something went wrong")
        # None lets a call through: a failure scripted ``after`` calls that succeed.
        self._failures: list[tuple[JSONResponse, dict[str, str]] | None] = []
        app = Starlette(
            routes=[
                Route("/{version}/{phone_number_id}/messages", self._messages, methods=["POST"]),
                Route("/{version}/{media_id}", self._media_url, methods=["GET"]),
                Route("/whatsapp_business/attachments/", self._download, methods=["GET"]),
            ]
        )
        self.server = LocalServer(app)

    @property
    def base_url(self) -> str:
        return self.server.url

    # ---- what the fake answers -------------------------------------------------------------------

    def fail_next(self, *statuses: int, retry_after: float | None = None, after: int = 0) -> None:
        """The next calls, once ``after`` calls have gone through, answer 429 (throughput
        reached), 500 (something went wrong) or 401 (the access token expired); ``retry_after``
        adds that header to the 429s."""
        self._failures.extend([None] * after)
        for status in statuses:
            headers = {}
            if status == 429:
                answer = graph_error(
                    429,
                    130429,
                    "(#130429) Rate limit hit",
                    details="Cloud API message throughput has been reached.",
                )
                if retry_after is not None:
                    headers["Retry-After"] = str(retry_after)
            elif status == 401:
                answer = graph_error(
                    401,
                    190,
                    "Error validating access token: Session has expired on Tuesday.",
                    subcode=463,
                )
            else:
                answer = graph_error(status, 131000, "Something went wrong")
            self._failures.append((answer, headers))

    def refuse_next(self, status: int, code: int, message: str, details: str | None = None) -> None:
        """The next call answers with this Graph API error (131047: the 24-hour window…)."""
        self._failures.append((graph_error(status, code, message, details=details), {}))

    def texts_to(self, number: str) -> list[str]:
        to = number.lstrip("+")
        return [m["text"]["body"] for m in self.sent if m["to"] == to and m["type"] == "text"]

    def reactions_to(self, number: str) -> list[tuple[str, str]]:
        """(message id, emoji) of each reaction sent to ``number``."""
        to = number.lstrip("+")
        return [
            (m["reaction"]["message_id"], m["reaction"]["emoji"])
            for m in self.sent
            if m["to"] == to and m["type"] == "reaction"
        ]

    async def _messages(self, request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {self.access_token}":
            return graph_error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        if request.path_params["phone_number_id"] != self.phone_number_id:
            return graph_error(
                400,
                100,
                "Unsupported post request. Object with ID "
                f"'{request.path_params['phone_number_id']}' does not exist",
                subcode=33,
            )
        self.calls += 1
        if self._failures and (failure := self._failures.pop(0)):
            answer, headers = failure
            answer.headers.update(headers)
            return answer
        body = await request.json()
        if body.get("messaging_product") != "whatsapp" or not body.get("to"):
            return graph_error(400, 100, "(#100) The parameter messaging_product is required.")
        kind = body.get("type", "text")
        if kind == "text" and len(body["text"]["body"]) > 4096:
            return graph_error(
                400, 100, "(#100) Param text['body'] must be at most 4096 characters long."
            )
        if kind not in ("text", "reaction"):
            return graph_error(400, 100, f"(#100) type {kind} is not what this fake speaks")
        wamid = new_wamid()
        self.sent.append({**body, "type": kind, "id": wamid})
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": body["to"], "wa_id": body["to"]}],
                "messages": [{"id": wamid}],
            }
        )

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {self.access_token}"

    async def _media_url(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return graph_error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        media_id = request.path_params["media_id"]
        self.media_asked.append(media_id)
        if self.fail_media:
            return graph_error(500, 131000, "Something went wrong")
        if media_id not in self.media:
            return graph_error(
                400, 100, f"Unsupported get request. Object with ID '{media_id}' does not exist"
            )
        content, mime_type = self.media[media_id]
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "url": f"{self.base_url}/whatsapp_business/attachments/?mid={media_id}&ext=1",
                "mime_type": mime_type,
                "sha256": hashlib.sha256(content).hexdigest(),
                "file_size": len(content),
                "id": media_id,
            }
        )

    async def _download(self, request: Request) -> Response:
        if not self._authorized(request):  # Meta's media URL wants the token too
            return Response(status_code=401)
        media_id = request.query_params.get("mid", "")
        if media_id not in self.media:
            return Response(status_code=404)
        self.downloads.append(media_id)
        content, mime_type = self.media[media_id]
        return Response(content, media_type=mime_type)

    # ---- the human's side: Meta calling the gateway's webhook -----------------------------------

    def voice_note(
        self,
        sender: str,
        audio: bytes,
        *,
        name: str | None = None,
        mime_type: str = "audio/ogg; codecs=opus",
        wamid: str | None = None,
    ) -> dict[str, Any]:
        """A webhook call carrying a voice note recorded by ``sender``; its media is served."""
        media_id = str(1_000_000_000_000 + len(self.media))
        self.media[media_id] = (audio, mime_type)
        body = {
            "id": media_id,
            "mime_type": mime_type,
            "sha256": hashlib.sha256(audio).hexdigest(),
            "voice": True,
        }
        return self.incoming(
            sender, None, name=name, wamid=wamid, message={"type": "audio", "audio": body}
        )

    def _call(self, value: dict[str, Any]) -> dict[str, Any]:
        value = {
            "messaging_product": "whatsapp",
            "metadata": {
                "display_phone_number": OUR_NUMBER,
                "phone_number_id": self.phone_number_id,
            },
            **value,
        }
        return {
            "object": "whatsapp_business_account",
            "entry": [
                {"id": "102290129340398", "changes": [{"value": value, "field": "messages"}]}
            ],
        }

    def incoming(
        self,
        sender: str,
        text: str | None,
        *,
        wamid: str | None = None,
        name: str | None = None,
        reply_to: str | None = None,
        message: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A webhook call carrying one message from ``sender`` (``+15551234567``): ``text``, or
        ``message`` for another type (``{"type": "image", "image": {...}}``)."""
        wa_id = sender.lstrip("+")
        body = message or {"type": "text", "text": {"body": text}}
        sent: dict[str, Any] = {
            "from": wa_id,
            "id": wamid or new_wamid(),
            "timestamp": str(int(time.time())),
            **body,
        }
        if reply_to:
            sent["context"] = {"from": OUR_NUMBER, "id": reply_to}
        return self._call(
            {
                "contacts": [{"profile": {"name": name or "Someone"}, "wa_id": wa_id}],
                "messages": [sent],
            }
        )

    def status_update(
        self, recipient: str, wamid: str, status: str = "delivered"
    ) -> dict[str, Any]:
        """A webhook call saying what became of a message we sent (no message in it)."""
        return self._call(
            {
                "statuses": [
                    {
                        "id": wamid,
                        "status": status,
                        "timestamp": str(int(time.time())),
                        "recipient_id": recipient.lstrip("+"),
                    }
                ]
            }
        )

    def sign(self, body: bytes, secret: str | None = None) -> str:
        digest = hmac.new((secret or self.app_secret).encode(), body, hashlib.sha256).hexdigest()
        return f"sha256={digest}"

    async def post_webhook(
        self, url: str, call: dict[str, Any] | bytes, *, signature: str | None = ""
    ) -> httpx.Response:
        """POST ``call`` to the gateway as Meta does; ``signature=None`` sends none, ``""``
        signs it with the app secret."""
        body = call if isinstance(call, bytes) else json.dumps(call).encode()
        headers = {"Content-Type": "application/json"}
        if signature is not None:
            headers["X-Hub-Signature-256"] = signature or self.sign(body)
        async with httpx.AsyncClient() as client:
            return await client.post(url, content=body, headers=headers)

    async def verify(self, url: str, token: str, *, mode: str = "subscribe") -> httpx.Response:
        """Meta's subscription handshake: GET with hub.mode, hub.verify_token, hub.challenge."""
        params = {"hub.mode": mode, "hub.verify_token": token, "hub.challenge": "1158201444"}
        async with httpx.AsyncClient() as client:
            return await client.get(url, params=params)
