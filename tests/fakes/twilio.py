"""Twilio for tests: the Messages REST API the `twilio` SDK calls, and a human whose texts arrive
as webhooks signed exactly as Twilio signs them (`RequestValidator.compute_signature` over the
public URL the webhook was configured with)."""

from __future__ import annotations

import base64
import secrets

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
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
        app = Starlette(
            routes=[
                Route("/2010-04-01/Accounts/{sid}/Messages.json", self._create, methods=["POST"])
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

    async def _create(self, request: Request) -> JSONResponse:
        auth = request.headers.get("authorization", "")
        credentials = f"{self.account_sid}:{self.auth_token}".encode()
        expected = "Basic " + base64.b64encode(credentials).decode()
        if request.path_params["sid"] != self.account_sid or auth != expected:
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
    ) -> dict[str, str]:
        prefix = "whatsapp:" if whatsapp else ""
        form = {
            "MessageSid": sid or "SM" + secrets.token_hex(16),
            "AccountSid": self.account_sid,
            "From": prefix + sender,
            "To": prefix + OUR_NUMBER,
            "Body": body,
            "NumMedia": "0",
        }
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
