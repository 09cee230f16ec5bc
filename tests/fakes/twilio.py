"""Twilio for tests: the Messages REST API the `twilio` SDK calls, and a human whose texts arrive
as webhooks signed exactly as Twilio signs them (`RequestValidator.compute_signature` over the
public URL the webhook was configured with).

Attachments (a voice note, a photo) are listed in the webhook as Twilio lists them (`NumMedia`,
`MediaUrlN`, `MediaContentTypeN`) and served as Twilio serves them with HTTP auth enforced on
media: the media URL wants the account SID and auth token (basic auth) and answers with a
redirect to a short-lived URL on its CDN, which needs no credentials."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from twilio.request_validator import RequestValidator

from tests.fakes.serve import LocalServer

ACCOUNT_SID = "AC" + "0" * 32
AUTH_TOKEN = "twilio-test-auth-token"
OUR_NUMBER = "+15550000000"


def _error(status: int, code: int, message: str) -> JSONResponse:
    return JSONResponse(
        {
            "code": code,
            "message": message,
            "more_info": f"https://www.twilio.com/docs/errors/{code}",
            "status": status,
        },
        status_code=status,
    )


class FakeTwilio:
    def __init__(self, account_sid: str = ACCOUNT_SID, auth_token: str = AUTH_TOKEN) -> None:
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.sent: list[dict[str, str]] = []
        self.calls = 0
        self._failures: list[JSONResponse] = []
        # Media by sid: its bytes and content type. `media_asked` lists each request of a media
        # URL (sid, and whether the account's credentials came with it); `cdn_requests` the
        # headers of each download from the CDN.
        self.media: dict[str, tuple[bytes, str]] = {}
        self.media_asked: list[tuple[str, bool]] = []
        self.cdn_requests: list[dict[str, str]] = []
        self.media_failures: list[int] = []  # statuses the media URL answers next, in order
        self._cdn: dict[str, str] = {}
        media = "/2010-04-01/Accounts/{sid}/Messages/{message}/Media/{media}"
        app = Starlette(
            routes=[
                Route("/2010-04-01/Accounts/{sid}/Messages.json", self._create, methods=["POST"]),
                Route(media, self._media, methods=["GET"]),
                Route("/cdn/{token}", self._cdn_download, methods=["GET"]),
            ]
        )
        self.server = LocalServer(app)

    @property
    def base_url(self) -> str:
        return self.server.url

    def fail_next(self, *statuses: int) -> None:
        for status in statuses:
            if status == 429:
                self._failures.append(_error(429, 20429, "Too Many Requests"))
            elif status == 400:
                self._failures.append(
                    _error(400, 21211, "The 'To' number is not a valid phone number.")
                )
            else:
                self._failures.append(_error(status, 20500, "Internal Server Error"))

    def bodies_to(self, to: str) -> list[str]:
        return [m["body"] for m in self.sent if m["to"] == to]

    def _authorized(self, request: Request) -> bool:
        auth = request.headers.get("authorization", "")
        credentials = f"{self.account_sid}:{self.auth_token}".encode()
        expected = "Basic " + base64.b64encode(credentials).decode()
        return request.path_params["sid"] == self.account_sid and auth == expected

    async def _media(self, request: Request) -> Response:
        sid = request.path_params["media"]
        authorized = self._authorized(request)
        self.media_asked.append((sid, authorized))
        if not authorized:
            return _error(401, 20003, "Authenticate")
        if self.media_failures:
            status = self.media_failures.pop(0)
            return _error(status, 20500 if status >= 500 else 20404, "media not available")
        if sid not in self.media:
            return _error(404, 20404, f"The requested resource {request.url.path} was not found")
        token = secrets.token_urlsafe(16)
        self._cdn[token] = sid
        return RedirectResponse(f"{self.base_url}/cdn/{token}", status_code=307)

    async def _cdn_download(self, request: Request) -> Response:
        self.cdn_requests.append(dict(request.headers))
        sid = self._cdn.get(request.path_params["token"])
        if sid is None or sid not in self.media:
            return Response("AccessDenied", status_code=403)
        audio, content_type = self.media[sid]
        return Response(audio, media_type=content_type)

    async def _create(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return _error(401, 20003, "Authenticate")
        self.calls += 1
        if self._failures:
            return self._failures.pop(0)
        form = await request.form()
        message = {
            "sid": "SM" + secrets.token_hex(16),
            "account_sid": self.account_sid,
            "to": str(form["To"]),
            "from": str(form["From"]),
            "body": str(form["Body"]),
            "status": "queued",
            "num_segments": "1",
            "direction": "outbound-api",
        }
        self.sent.append(message)
        return JSONResponse(message, status_code=201)

    # ---- the human's side: Twilio posting an incoming message to the gateway ---------------------

    def incoming(
        self,
        sender: str,
        body: str,
        *,
        sid: str | None = None,
        whatsapp: bool = False,
        profile_name: str | None = None,
        media: Sequence[tuple[bytes, str]] = (),
    ) -> dict[str, str]:
        """A human's message as Twilio posts it; ``media`` attaches (bytes, content type) items,
        kept here and served from their media URLs."""
        prefix = "whatsapp:" if whatsapp else ""
        message_sid = sid or ("MM" if media else "SM") + secrets.token_hex(16)
        form = {
            "MessageSid": message_sid,
            "AccountSid": self.account_sid,
            "From": prefix + sender,
            "To": prefix + OUR_NUMBER,
            "Body": body,
            "NumMedia": str(len(media)),
        }
        for i, (data, content_type) in enumerate(media):
            media_sid = "ME" + secrets.token_hex(16)
            self.media[media_sid] = (data, content_type)
            form[f"MediaUrl{i}"] = (
                f"{self.base_url}/2010-04-01/Accounts/{self.account_sid}/Messages/"
                f"{message_sid}/Media/{media_sid}"
            )
            form[f"MediaContentType{i}"] = content_type
        if profile_name:
            form["ProfileName"] = profile_name
        return form

    def signature(self, public_url: str, form: dict[str, str], token: str | None = None) -> str:
        validator = RequestValidator(token or self.auth_token)
        return str(validator.compute_signature(public_url, form))

    async def post_webhook(
        self, local_url: str, public_url: str, form: dict[str, str], *, signature: str | None = ""
    ) -> httpx.Response:
        """POST ``form`` to the gateway at ``local_url``, signed for ``public_url`` (as Twilio,
        which only knows the public URL, signs it); ``signature=None`` sends none."""
        headers = {}
        if signature is not None:
            headers["X-Twilio-Signature"] = signature or self.signature(public_url, form)
        async with httpx.AsyncClient() as client:
            return await client.post(local_url, data=form, headers=headers)
