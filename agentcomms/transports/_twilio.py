"""SMS and WhatsApp through Twilio's Messaging API (the `twilio` SDK); `sms.py` and `whatsapp.py`
are this, each with its own config section and webhook path.

Receiving: Twilio posts each message to ``server.public_url`` + the provider's path, signed with
``X-Twilio-Signature`` (HMAC-SHA1 of that URL and the form, keyed by the auth token). The
signature is checked against the public URL, not the local one, so it holds behind a tunnel or a
proxy; a forged or unsigned request gets 403 and nothing is queued. The answer is 200 only once
the message is durable (or rejected and recorded); a reply for the sender (a pairing code, a full
mailbox) rides in the answer as TwiML. Twilio does not post a message again after an error answer
(by default it tries again only when it could not connect), so a message that could not be kept
(Temporal unreachable) is answered too, asking the sender to send it again: nothing is lost
without the sender knowing.

A message's attachments come as ``NumMedia``, ``MediaUrl0…`` and ``MediaContentType0…``. The
first audio one is a voice note: the gateway fetches it (only for a sender it lets in) from its
media URL with the account's credentials (HTTP basic auth); Twilio answers with a redirect to a
short-lived URL of its CDN, which is fetched without them. Other attachments are not passed on:
a message of nothing else gets a short reply saying only text and voice notes reach the agent,
once the gateway has let its sender in (a stranger's gets what their words would).

Sending: ``Messages.create`` from ``from_number``. SMS and WhatsApp have no reactions, so a
receipt is a short reply, and a billed message: ``receipts`` says which are sent (by default
only "typed").
"""

from __future__ import annotations

import asyncio
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
from agentcomms.errors import (
    ChatProviderUnavailable,
    RateLimited,
    SendRefused,
    VoiceNoteNotServed,
    VoiceNoteRefused,
)
from agentcomms.transports import (
    InboundMessage,
    InboundSink,
    LinkStatus,
    ReceiptStage,
    VoiceNote,
    read_at_most,
    with_unread,
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
# A message carries at most ten attachments.
MAX_MEDIA = 10
# Twilio does not post a messaging webhook again after an error answer (by default it tries
# again only when it could not connect), so a voice note Twilio cannot serve for a moment is
# asked for again here, and one it still cannot serve is answered and recorded, not left to a
# retry that will not come.
MEDIA_TRIES = 3
MEDIA_RETRY_S = 0.5
MEDIA_TIMEOUT_S = 20.0
NOT_KEPT = (
    "Not delivered: agentcomms could not take your message just now. Please send it again in a "
    "minute."
)


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


@dataclass(frozen=True)
class Attachment:
    """One of a message's media items, as the webhook lists it."""

    url: str
    content_type: str

    @property
    def kind(self) -> str:
        """What the human would call it, in a reply: image, video, audio or file."""
        major = self.content_type.partition("/")[0]
        return major if major in ("image", "video", "audio") else "file"


def attachments(form: dict[str, str]) -> list[Attachment]:
    """``NumMedia`` items of ``MediaUrlN`` and ``MediaContentTypeN``."""
    count = form.get("NumMedia", "0")
    return [
        Attachment(form[f"MediaUrl{i}"], form.get(f"MediaContentType{i}", "").lower())
        for i in range(min(int(count), MAX_MEDIA) if count.isdigit() else 0)
        if form.get(f"MediaUrl{i}")
    ]


def _kinds(unread: list[Attachment]) -> str:
    return " and ".join(dict.fromkeys(a.kind for a in unread))


def _credentials_go_to(url: str, base_url: str | None) -> bool:
    """The account's credentials are sent to Twilio's API only (or to the configured base_url):
    a media URL arrives in a signed webhook, but a secret goes only where it belongs."""
    target = httpx.URL(url)
    if base_url:
        base = httpx.URL(base_url)
        if (target.scheme, target.host, target.port) == (base.scheme, base.host, base.port):
            return True
    return target.scheme == "https" and (
        target.host == "twilio.com" or target.host.endswith(".twilio.com")
    )


def _media_refusal(response: httpx.Response, provider: str, *, credentials: bool) -> None:
    """Gone, or not ours, is for good; a 5xx, a timeout or a rate limit may pass."""
    if response.is_success:
        return
    status = response.status_code
    if status in (401, 403) and credentials:
        log.warning(
            "%s: Twilio refused the account's credentials for a voice note (%s): check "
            "chat.%s.account_sid and chat.%s.auth_token",
            provider,
            status,
            provider,
            provider,
        )
    if 400 <= status < 500 and status not in (408, 429):
        raise VoiceNoteRefused(f"Twilio would not hand it over ({status})")
    raise VoiceNoteNotServed(f"Twilio answered {status}")


async def _download(section: TwilioMessagingConfig, provider: str, url: str, limit: int) -> bytes:
    if section.account_sid is None or section.auth_token is None:
        log.warning("%s: a voice note came, but chat.%s.account_sid is not set", provider, provider)
        raise VoiceNoteRefused("this gateway has no Twilio account to fetch it with")
    if not _credentials_go_to(url, section.base_url):
        raise VoiceNoteRefused(f"its address is not Twilio's ({httpx.URL(url).host})")
    auth = (section.account_sid, section.auth_token.get_secret_value())
    try:
        async with httpx.AsyncClient(timeout=MEDIA_TIMEOUT_S) as client:
            async with client.stream("GET", url, auth=auth) as asked:
                if not asked.is_redirect:
                    _media_refusal(asked, provider, credentials=True)
                    return await read_at_most(asked, limit)
                location = asked.url.join(asked.headers.get("location", ""))
            # The redirect is to a short-lived, signed URL of Twilio's CDN: no credentials.
            async with client.stream("GET", location) as served:
                _media_refusal(served, provider, credentials=False)
                return await read_at_most(served, limit)
    except httpx.HTTPError as exc:
        raise VoiceNoteNotServed(f"Twilio did not answer: {type(exc).__name__}") from exc


def voice_note(section: TwilioMessagingConfig, provider: str, media: Attachment) -> VoiceNote:
    """An audio attachment, to fetch from Twilio when the gateway wants it."""

    async def fetch(max_bytes: int) -> bytes:
        problem = ""
        for attempt in range(MEDIA_TRIES):
            if attempt:
                await asyncio.sleep(MEDIA_RETRY_S * 2 ** (attempt - 1))
            try:
                return await _download(section, provider, media.url, max_bytes)
            except VoiceNoteNotServed as exc:
                problem = str(exc)
        raise VoiceNoteRefused(f"Twilio could not hand it over ({problem})")

    return VoiceNote(fetch=fetch, content_type=media.content_type or "audio/ogg")


def twiml(*verbs: str) -> Response:
    """A TwiML answer holding `verbs` (already escaped), as every Twilio webhook answers."""
    body = '<?xml version="1.0" encoding="UTF-8"?><Response>' + "".join(verbs) + "</Response>"
    return Response(body, media_type="application/xml")


def message_reply(reply: str | None) -> Response:
    """A messaging webhook's answer: `reply` sent back to the sender, or nothing."""
    return twiml(f"<Message>{escape(reply)}</Message>") if reply is not None else twiml()


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
        forbidden = PlainTextResponse("forbidden: bad or missing X-Twilio-Signature", 403)
        if SIGNATURE_HEADER not in request.headers:
            return forbidden  # before the body is read: an unsigned caller costs nothing
        form = {k: str(v) for k, v in (await request.form()).items()}
        if not self._signed(request, form):
            return forbidden
        if self._section.account_sid and form.get("AccountSid") != self._section.account_sid:
            return PlainTextResponse("forbidden: another account", 403)
        sender = self._flavour.number(form.get("From", ""))
        if not sender or "MessageSid" not in form:
            return PlainTextResponse("not a Twilio message", 400)
        media = attachments(form)
        audio = next((m for m in media if m.kind == "audio"), None)
        unread = [m for m in media if m is not audio]
        text = form.get("Body", "")
        # Nothing an agent can read still goes to the gateway, which checks the sender first:
        # a stranger's photo gets what their words would, and each answer is a billed message.
        unreadable = _kinds(unread) if unread and audio is None and not text.strip() else None
        if unread:
            text = with_unread(_kinds(unread), text).rstrip()
        name = self._flavour.name
        message = InboundMessage(
            provider=name,
            chat_id=sender,
            message_id=form["MessageSid"],
            sender_id=sender,
            sender_name=form.get("ProfileName") or sender,
            text=text,
            chat_type="private",
            voice=voice_note(self._section, name, audio) if audio is not None else None,
            unreadable=unreadable,
        )
        try:
            result = await self._sink.accept(message)
        except Exception:
            log.exception("%s webhook: %s not kept", self._flavour.name, message.message_id)
            return message_reply(NOT_KEPT)
        return message_reply(result.reply)


# twilio ships no types, so its AsyncHttpClient is Any to mypy.
class HttpxTwilioClient(AsyncHttpClient):  # type: ignore[misc]
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
            raise ChatProviderUnavailable(what) from exc
        if exc.status in (401, 403):
            raise SendRefused(
                f"{what}: check chat.{provider}.account_sid and chat.{provider}.auth_token"
            ) from exc
        raise SendRefused(
            f"{what} (sending to {chat_id}: check the number, and chat.{provider}.from_number)"
        ) from exc
    except (httpx.HTTPError, OSError) as exc:
        raise ChatProviderUnavailable(f"Twilio did not answer: {exc!r}") from exc
