"""WhatsApp through Meta's WhatsApp Business Cloud API (httpx), when ``chat.whatsapp.api`` is
``cloud``.

Receiving: Meta calls ``server.public_url`` + ``/webhooks/whatsapp``. A GET is the subscription
handshake: it is answered with ``hub.challenge`` only when ``hub.verify_token`` is ours. A POST
carries JSON signed in ``X-Hub-Signature-256`` (``sha256=`` + HMAC-SHA256 of the raw body, keyed
by the app secret); the signature is checked over the bytes as received, before anything is
parsed, and a forged or unsigned call gets 403 with nothing queued. The answer is 200 only once
every message in the call was kept; otherwise Meta delivers the call again, and what was kept
already is a duplicate then (its event id comes from the ``wamid``). Status callbacks (sent,
delivered, read) are acknowledged and ignored.

An ``audio`` message (a voice note, or an audio file) carries a media id: the gateway fetches it
only for a sender it lets in, with ``GET /{api_version}/{media-id}`` (its URL, type and size),
then a GET of that URL; both carry the access token as a bearer token, as Meta requires.

Unlike Twilio's, the answer to a webhook cannot carry a reply, so a reply for the sender (a
pairing code, an unmapped chat, a full mailbox, a voice note not heard, a photo not passed on)
is sent through the API after the answer, once, at best effort.

Sending: ``POST {base_url}/{api_version}/{phone_number_id}/messages`` with the access token as a
bearer token, split at 4096 characters; receipts are reactions on the human's message.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import Any

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from agentcomms.config import Config, WhatsAppConfig
from agentcomms.errors import (
    ChatProviderUnavailable,
    RateLimited,
    SendError,
    SendRefused,
    VoiceNoteRefused,
)
from agentcomms.transports import (
    InboundMessage,
    InboundSink,
    LinkStatus,
    ReceiptStage,
    VoiceNote,
    read_at_most,
    typed_with_note,
    with_unread,
)

log = logging.getLogger(__name__)

NAME = "whatsapp"
GRAPH_API = "https://graph.facebook.com"
WEBHOOK_PATH = "/webhooks/whatsapp"
SIGNATURE_HEADER = "X-Hub-Signature-256"
MAX_TEXT = 4096
# Receipts, as reactions on the human's message (one per message: "typed" replaces "queued").
RECEIPTS: dict[ReceiptStage, str] = {"queued": "👀", "typed": "✍"}
# Graph API throttling: app (4), account (80007), throughput (130429), one person (131056).
RATE_LIMIT_CODES = frozenset({4, 80007, 130429, 131056})
# Meta gives no Retry-After; its pair limit lets one message through about every 6 seconds.
DEFAULT_RETRY_AFTER_S = 6.0
# "Temporary" (2), "something went wrong" (131000), "service unavailable" (131016).
TRANSIENT_CODES = frozenset({1, 2, 131000, 131016})
# Messages with words the agent can read; others get a short reply instead.
_MEDIA_WITH_CAPTION = ("image", "video", "document")
# Nothing a human wrote to anyone: no answer, not even to a stranger.
_IGNORED_TYPES = ("reaction", "system", "ephemeral")


def signature(app_secret: str, body: bytes) -> str:
    """``X-Hub-Signature-256`` as Meta computes it for ``body``."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def number(wa_id: str) -> str:
    """Meta's ``15551234567`` → ``+15551234567``: the chat and sender id, as through Twilio."""
    return "+" + wa_id.lstrip("+")


def _text_of(message: dict[str, Any]) -> str | None:
    kind = message.get("type")
    body = message.get(kind) if isinstance(kind, str) else None
    if not isinstance(body, dict):
        return None
    if kind == "text":
        return body.get("body") or None
    if kind == "button":  # a quick-reply button of a template
        return body.get("text") or None
    if kind == "interactive":
        chosen = body.get("button_reply") or body.get("list_reply") or {}
        return chosen.get("title") or None
    if kind in _MEDIA_WITH_CAPTION and body.get("caption"):
        return with_unread(kind, body["caption"])
    return None


def inbound(
    message: dict[str, Any], names: dict[str, str], section: WhatsAppConfig | None = None
) -> InboundMessage | None:
    """A webhook's message as agentcomms sees it (a voice note needs ``section`` to be
    fetched); None for what needs no answer (a reaction)."""
    text = _text_of(message)
    sender = str(message.get("from", ""))
    kind = str(message.get("type") or "message")
    audio = message.get("audio") if kind == "audio" else None
    voice = (
        voice_note(section, audio)
        if section is not None and isinstance(audio, dict) and audio.get("id")
        else None
    )
    # No words and no voice note: still the gateway's to answer, once it has checked the
    # sender (a stranger's photo gets what their words would).
    unreadable = kind if text is None and voice is None else None
    if unreadable in _IGNORED_TYPES or not sender or not message.get("id"):
        return None
    if unreadable is not None:
        text = with_unread(unreadable, "").rstrip()  # what a stranger's rejected record shows
    context = message.get("context") or {}
    return InboundMessage(
        provider=NAME,
        chat_id=number(sender),
        message_id=str(message["id"]),
        sender_id=number(sender),
        sender_name=names.get(sender) or number(sender),
        text=text or "",
        chat_type="private",
        reply_to=context.get("id"),
        voice=voice,
        unreadable=unreadable,
    )


def voice_note(section: WhatsAppConfig, audio: dict[str, Any]) -> VoiceNote:
    """An audio message's media, to fetch through the Graph API when the gateway wants it."""
    media_id = str(audio["id"])

    async def fetch(max_bytes: int) -> bytes:
        token = section.access_token
        assert token is not None
        headers = {"Authorization": f"Bearer {token.get_secret_value()}"}
        base = (section.base_url or GRAPH_API).rstrip("/")
        async with httpx.AsyncClient(timeout=30) as client:
            found = await client.get(f"{base}/{section.api_version}/{media_id}", headers=headers)
            _media_refusal(found)
            media = found.json()
            size = media.get("file_size")
            if isinstance(size, int) and size > max_bytes:
                raise VoiceNoteRefused(f"it is {size / 1e6:.0f} MB, too large")
            # Meta's media URL wants the same bearer token (and expires within minutes).
            async with client.stream("GET", str(media["url"]), headers=headers) as response:
                _media_refusal(response)
                return await read_at_most(response, max_bytes)

    return VoiceNote(fetch=fetch, content_type=str(audio.get("mime_type") or "audio/ogg"))


def _media_refusal(response: httpx.Response) -> None:
    """A 4xx means the media will never come (gone, not ours); a 5xx raises to be tried again."""
    if response.is_success:
        return
    if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
        raise VoiceNoteRefused(
            f"WhatsApp would not hand it over ({response.status_code}); please send it again"
        )
    response.raise_for_status()


class CloudReceiver:
    """The Cloud API's webhook; the listener is the gateway's HTTP server."""

    def __init__(self, cfg: Config, sink: InboundSink) -> None:
        self._section = cfg.chat.whatsapp
        self._sink = sink
        self._sender = CloudSender(cfg)
        problems = self._section.webhook_problems(cfg.server.public_url)
        self.status = (
            LinkStatus("failed", "; ".join(problems)) if problems else LinkStatus("connected")
        )

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def routes(self) -> list[BaseRoute]:
        return [
            Route(WEBHOOK_PATH, self._verify, methods=["GET"]),
            Route(WEBHOOK_PATH, self._webhook, methods=["POST"]),
        ]

    async def _verify(self, request: Request) -> Response:
        """Meta's subscription handshake: echo the challenge to whoever knows the verify token."""
        query = request.query_params
        token = self._section.verify_token
        given = query.get("hub.verify_token", "")
        if (
            query.get("hub.mode") != "subscribe"
            or token is None
            or not hmac.compare_digest(given.encode(), token.get_secret_value().encode())
        ):
            return PlainTextResponse("forbidden: wrong hub.verify_token", 403)
        return PlainTextResponse(query.get("hub.challenge", ""))

    def _signed(self, body: bytes, given: str | None) -> bool:
        secret = self._section.app_secret
        if secret is None or given is None:
            return False
        return hmac.compare_digest(
            given.encode(), signature(secret.get_secret_value(), body).encode()
        )

    async def _webhook(self, request: Request) -> Response:
        forbidden = PlainTextResponse(f"forbidden: bad or missing {SIGNATURE_HEADER}", 403)
        if SIGNATURE_HEADER not in request.headers:
            return forbidden  # before the body is read: an unsigned caller costs nothing
        body = await request.body()  # at most MAX_WEBHOOK_BODY: the gateway's guard refuses more
        if not self._signed(body, request.headers.get(SIGNATURE_HEADER)):
            return forbidden
        try:
            payload = json.loads(body)
            values = _message_values(payload)
        except (ValueError, TypeError, AttributeError):
            return PlainTextResponse("not a WhatsApp Business webhook", 400)
        replies: list[tuple[str, str, str]] = []  # (chat, message answered, reply)
        for value in values:
            metadata = value.get("metadata") or {}
            if str(metadata.get("phone_number_id")) != self._section.phone_number_id:
                # Another number of the same business account: not ours to answer.
                continue
            names = {
                str(c.get("wa_id")): (c.get("profile") or {}).get("name", "")
                for c in value.get("contacts") or []
            }
            for message in value.get("messages") or []:
                received = inbound(message, names, self._section)
                if received is None:
                    continue
                try:
                    result = await self._sink.accept(received)
                except Exception:  # not kept: Meta delivers the call again after a non-2xx
                    log.exception("whatsapp webhook: %s not kept", received.message_id)
                    return PlainTextResponse("not kept, try again", 503)
                if result.reply:
                    replies.append((received.chat_id, received.message_id, result.reply))
        return PlainTextResponse("ok", background=BackgroundTask(self._answer, replies))

    async def _answer(self, replies: list[tuple[str, str, str]]) -> None:
        for chat_id, message_id, reply in replies:
            try:
                await self._sender.send_text(chat_id, reply, reply_to=message_id)
            except SendError as exc:  # the message was handled; only the answer is lost
                log.warning("whatsapp: could not answer %s: %s", chat_id, exc)


def _message_values(payload: Any) -> list[dict[str, Any]]:
    """The ``value`` of each ``messages`` change in a webhook call (statuses ride in them too)."""
    if payload.get("object") != "whatsapp_business_account":
        raise ValueError("not a WhatsApp Business Account webhook")
    return [
        change["value"]
        for entry in payload.get("entry") or []
        for change in entry.get("changes") or []
        if change.get("field") == "messages" and isinstance(change.get("value"), dict)
    ]


class CloudSender:
    """Sends with a client of its own per call, closed after it: an activity holds no
    connection between sends, and a renewed access token is read at the next send."""

    max_chars = MAX_TEXT

    def __init__(self, cfg: Config) -> None:
        self._section: WhatsAppConfig = cfg.chat.whatsapp

    def _url(self) -> str:
        s = self._section
        base = (s.base_url or GRAPH_API).rstrip("/")
        return f"{base}/{s.api_version}/{s.phone_number_id}/messages"

    async def _post(self, client: httpx.AsyncClient, chat_id: str, body: dict[str, Any]) -> str:
        token = self._section.access_token
        assert token is not None
        request = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": chat_id.lstrip("+"),  # Meta's wa_id: the number without "+"
            **body,
        }
        try:
            response = await client.post(
                self._url(),
                json=request,
                headers={"Authorization": f"Bearer {token.get_secret_value()}"},
            )
        except httpx.HTTPError as exc:
            raise ChatProviderUnavailable(
                f"the WhatsApp Cloud API did not answer: {exc!r}"
            ) from exc
        if response.is_success:
            messages = response.json().get("messages") or [{}]
            return str(messages[0].get("id", ""))
        raise graph_error(response, chat_id)

    async def send_text(self, chat_id: str, text: str, *, reply_to: str | None = None) -> str:
        body: dict[str, Any] = {"type": "text", "text": {"body": text}}
        if reply_to:  # quoted above the text, in WhatsApp
            body["context"] = {"message_id": reply_to}
        async with httpx.AsyncClient(timeout=20) as client:
            return await self._post(client, chat_id, body)

    async def receipt(
        self, chat_id: str, message_id: str, stage: ReceiptStage, *, note: str | None = None
    ) -> None:
        async with httpx.AsyncClient(timeout=20) as client:
            await self._post(
                client,
                chat_id,
                {
                    "type": "reaction",
                    "reaction": {"message_id": message_id, "emoji": RECEIPTS[stage]},
                },
            )
        if note:
            await self.send_text(chat_id, typed_with_note(note), reply_to=message_id)

    async def close(self) -> None:
        pass


def graph_error(response: httpx.Response, chat_id: str) -> SendError:
    """A Graph API error answer as SendError: wait, retry with backoff, or fail with what to fix."""
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    code = error.get("code")
    details = (error.get("error_data") or {}).get("details")
    what = (
        f"WhatsApp Cloud API ({response.status_code}, code {code}): "
        f"{error.get('message') or response.reason_phrase}" + (f" ({details})" if details else "")
    )
    status = response.status_code
    if status == 429 or code in RATE_LIMIT_CODES:
        return RateLimited(what, retry_after=_retry_after(response))
    if status >= 500 or code in TRANSIENT_CODES:
        return ChatProviderUnavailable(what)
    if code == 190 or status == 401:
        return SendRefused(
            f"{what}: the access token expired or was revoked; set chat.whatsapp.access_token "
            "to a system user's token (temporary tokens last a day)"
        )
    if code == 131030:
        return SendRefused(
            f"{what}: {chat_id} is not in the allowed list of the test number; add it under "
            "WhatsApp > API Setup, or send from a production number"
        )
    if code == 131047:
        return SendRefused(
            f"{what}: the 24-hour window closed (more than 24 hours since {chat_id} last "
            "wrote); they must write first, as WhatsApp allows only templates outside it"
        )
    if code == 10 or code == 3 or (isinstance(code, int) and 200 <= code < 300) or status == 403:
        return SendRefused(
            f"{what}: the access token may not send for this number; give its system user "
            "whatsapp_business_messaging on it (chat.whatsapp.phone_number_id)"
        )
    if code == 100 and error.get("error_subcode") == 33:
        return SendRefused(
            f"{what}: check chat.whatsapp.phone_number_id (the number's id from WhatsApp > API "
            "Setup, not the phone number)"
        )
    return SendRefused(f"{what} (sending to {chat_id})")


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(float(response.headers.get("Retry-After", "")), 0.1)
    except ValueError:
        return DEFAULT_RETRY_AFTER_S
