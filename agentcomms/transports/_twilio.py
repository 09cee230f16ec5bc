"""SMS and WhatsApp through Twilio's Messaging API (the `twilio` SDK); `sms.py` and `whatsapp.py`
are this, each with its own config section and webhook path.

Receiving: Twilio posts each message to ``server.public_url`` + the provider's path, signed with
``X-Twilio-Signature`` (HMAC-SHA1 of that URL and the form, keyed by the auth token). The
signature is checked against the public URL, not the local one, so it holds behind a tunnel or a
proxy; a forged or unsigned request gets 403 and nothing is queued. The answer is 200 only once
the message is durable (or rejected and recorded); a reply for the sender (a pairing code, a full
mailbox) rides in the answer as TwiML. Anything else is a 503, and Twilio tries again.

Sending: ``Messages.create`` from ``from_number``. SMS and WhatsApp have no reactions, so a
receipt is a short reply, and a billed message: ``receipts`` says which are sent (by default
only "typed").
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal
from xml.sax.saxutils import escape

import httpx
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from twilio.base.exceptions import TwilioRestException
from twilio.http import AsyncHttpClient
from twilio.http.response import Response as TwilioResponse
from twilio.request_validator import RequestValidator
from twilio.rest import Client

from agentcomms.config import Config, TwilioMessagingConfig
from agentcomms.transports import (
    InboundMessage,
    InboundSink,
    LinkStatus,
    ProviderUnavailable,
    RateLimited,
    ReceiptStage,
    SendRefused,
)

log = logging.getLogger(__name__)

# Twilio concatenates longer SMS itself, up to this many characters per message.
MAX_TEXT = 1600
RECEIPTS: dict[ReceiptStage, str] = {
    "queued": "✓ queued for the agent",
    "typed": "✓ typed into the agent's terminal",
}
# Which receipts go out for each `receipts` setting: every one is a text the operator pays for.
RECEIPTS_SENT: dict[str, tuple[ReceiptStage, ...]] = {
    "typed": ("typed",),
    "both": ("queued", "typed"),
    "none": (),
}
SIGNATURE_HEADER = "X-Twilio-Signature"
_EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'


@dataclass(frozen=True)
class Flavour:
    """What differs between SMS and WhatsApp on Twilio."""

    name: Literal["sms", "whatsapp"]
    path: str
    address_prefix: str  # Twilio spells WhatsApp numbers "whatsapp:+1555…"

    def section(self, cfg: Config) -> TwilioMessagingConfig:
        section = cfg.chat.provider(self.name)
        assert isinstance(section, TwilioMessagingConfig)
        return section

    def number(self, address: str) -> str:
        """``whatsapp:+15551234567`` → ``+15551234567`` (our chat id); SMS numbers are as is."""
        return address.removeprefix(self.address_prefix)


def twiml(reply: str | None) -> Response:
    body = (
        _EMPTY_TWIML
        if reply is None
        else '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Response><Message>{escape(reply)}</Message></Response>"
    )
    return Response(body, media_type="text/xml")


class TwilioReceiver:
    """Twilio's webhook for one flavour; the listener is the gateway's HTTP server."""

    def __init__(self, flavour: Flavour, cfg: Config, sink: InboundSink) -> None:
        self._flavour = flavour
        self._section = flavour.section(cfg)
        self._public_url = cfg.server.public_url
        self._sink = sink
        if self._public_url is None:
            self.status = LinkStatus(
                "failed",
                "server.public_url is not set: Twilio cannot reach the webhook, and its "
                "signatures cannot be checked",
            )
        else:
            self.status = LinkStatus("connected")

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def routes(self) -> list[BaseRoute]:
        return [Route(self._flavour.path, self._webhook, methods=["POST"])]

    def _signed(self, request: Request, form: dict[str, str]) -> bool:
        token = self._section.auth_token
        signature = request.headers.get(SIGNATURE_HEADER)
        if token is None or signature is None or self._public_url is None:
            return False
        # The URL Twilio was given: the public one, with the path and query it called.
        url = self._public_url + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        return bool(RequestValidator(token.get_secret_value()).validate(url, form, signature))

    async def _webhook(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        if not self._signed(request, form):
            return PlainTextResponse("forbidden: bad or missing X-Twilio-Signature", 403)
        if self._section.account_sid and form.get("AccountSid") != self._section.account_sid:
            return PlainTextResponse("forbidden: another account", 403)
        sender = self._flavour.number(form.get("From", ""))
        if not sender or "MessageSid" not in form:
            return PlainTextResponse("not a Twilio message", 400)
        message = InboundMessage(
            provider=self._flavour.name,
            chat_id=sender,
            message_id=form["MessageSid"],
            sender_id=sender,
            sender_name=form.get("ProfileName") or sender,
            text=form.get("Body", ""),
            chat_type="private",
        )
        try:
            result = await self._sink.accept(message)
        except Exception:  # not kept: a non-2xx answer makes Twilio try again
            log.exception("%s webhook: %s not kept", self._flavour.name, message.message_id)
            return PlainTextResponse("not kept, try again", 503)
        return twiml(result.reply)


class HttpxTwilioClient(AsyncHttpClient):
    """The SDK's HTTP seam, spoken with httpx: one short-lived client per request, so nothing
    stays open between activities (the SDK's own aiohttp client keeps a session, or opens one
    per request with a deprecated BasicAuth)."""

    def __init__(self, timeout: float = 20) -> None:
        super().__init__(log, True, timeout)

    async def request(
        self,
        method: str,
        url: str,
        params: dict[str, object] | None = None,
        data: dict[str, object] | None = None,
        headers: dict[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        timeout: float | None = None,
        allow_redirects: bool = False,
    ) -> TwilioResponse:
        async with httpx.AsyncClient(timeout=timeout or self.timeout) as client:
            response = await client.request(
                method.upper(),
                url,
                params=params,  # type: ignore[arg-type]
                data=data,
                headers=headers,
                auth=auth,
                follow_redirects=allow_redirects,
            )
        return TwilioResponse(response.status_code, response.text, response.headers)


class TwilioSender:
    max_chars = MAX_TEXT

    def __init__(self, flavour: Flavour, cfg: Config) -> None:
        self._flavour = flavour
        self._section = flavour.section(cfg)

    def _client(self) -> Client:
        s = self._section
        assert s.account_sid is not None and s.auth_token is not None
        client = Client(
            s.account_sid,
            s.auth_token.get_secret_value(),
            http_client=HttpxTwilioClient(),
        )
        if s.base_url:
            client.api.base_url = s.base_url.rstrip("/")
        return client

    async def send_text(self, chat_id: str, text: str, *, reply_to: str | None = None) -> str:
        if not self._section.from_number:
            raise SendRefused(
                f"chat.{self._flavour.name}.from_number is not set: set it to your Twilio number"
            )
        prefix = self._flavour.address_prefix
        with twilio_errors(self._flavour.name, chat_id):
            sent = await self._client().messages.create_async(
                to=prefix + chat_id, from_=prefix + self._section.from_number, body=text
            )
        return str(sent.sid)

    async def receipt(
        self, chat_id: str, message_id: str, stage: ReceiptStage, *, note: str | None = None
    ) -> None:
        if stage not in RECEIPTS_SENT[self._section.receipts]:
            return
        await self.send_text(chat_id, f"{RECEIPTS[stage]}, but {note}" if note else RECEIPTS[stage])

    async def close(self) -> None:
        pass


@contextlib.contextmanager
def twilio_errors(provider: str, chat_id: str) -> Iterator[None]:
    """Twilio's errors as SendError: wait, retry with backoff, or fail with what to fix."""
    try:
        yield
    except TwilioRestException as exc:
        what = f"Twilio ({exc.status}, code {exc.code}): {exc.msg}"
        if exc.status == 429:
            raise RateLimited(what, retry_after=1.0) from exc
        if exc.status >= 500:
            raise ProviderUnavailable(what) from exc
        if exc.status in (401, 403):
            raise SendRefused(
                f"{what}: check chat.{provider}.account_sid and chat.{provider}.auth_token"
            ) from exc
        raise SendRefused(
            f"{what} (sending to {chat_id}: check the number, and chat.{provider}.from_number)"
        ) from exc
    except (httpx.HTTPError, OSError) as exc:
        raise ProviderUnavailable(f"Twilio did not answer: {exc!r}") from exc
