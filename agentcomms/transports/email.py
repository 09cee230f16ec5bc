"""Email: IMAP in, SMTP out. Channels are ``email:<the human's address>``.

Sending (``aiosmtplib``): each agent writes from its own plus-address (``agents+backend@…``,
named "backend (agentcomms)") with a Message-ID that carries its id (``<token.backend@…>``), so
the human's reply comes back to the agent that wrote, whichever header their mail client keeps.
An approval is a message with a reply code ("Reply YES K7QF or NO K7QF"), answered by a reply.
An agent's files are attached to the message that carries its words.
TLS is ``implicit``, ``starttls`` (refused when the server does not offer it) or ``none``;
``cafile`` names the CA of a server with a private certificate.

Receiving (``aioimaplib``, :mod:`agentcomms.transports._email_in`): IDLE where the server has it,
polling otherwise; see there.

Authentication by address alone means nothing in email (anyone can write any From), so a sender
is believed only when the operator's own receiving server says DKIM or SPF passed for that
address (``trusted_authserv_id``); nobody is believed by default.
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
import secrets
import ssl
from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import formataddr, formatdate

import aiosmtplib

from agentcomms.config import Config
from agentcomms.config.chat import EmailConfig, MailServerConfig
from agentcomms.errors import ChatProviderUnavailable, SendRefused
from agentcomms.transports import InboundSink, ReceiptStage, Receiver
from agentcomms.transports._email_text import is_address, new_message_id, plus

# An email carries a long text whole: a plan or a long reply is one message, not pieces.
MAX_TEXT = 100_000
SUBJECT_CHARS = 70
SMTP_TIMEOUT_S = 30.0
SMTP_PORTS = {"implicit": 465, "starttls": 587, "none": 25}
IMAP_PORTS = {"implicit": 993, "starttls": 143, "none": 143}
RECEIPTS: dict[ReceiptStage, str] = {
    "queued": "✓ queued for the agent",
    "typed": "✓ typed into the agent's terminal",
}
RECEIPTS_SENT: dict[str, tuple[ReceiptStage, ...]] = {
    "typed": ("typed",),
    "both": ("queued", "typed"),
    "none": (),
}


def tls_context(server: MailServerConfig) -> ssl.SSLContext:
    """The context a connection verifies the server with: the system's CAs, or ``cafile``."""
    return ssl.create_default_context(cafile=server.cafile)


def subject_of(text: str, *, reply: bool) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "(no text)")
    if len(first) > SUBJECT_CHARS:
        first = first[: SUBJECT_CHARS - 1].rstrip() + "…"
    return f"Re: {first}" if reply else first


def section(cfg: Config) -> EmailConfig:
    return cfg.chat.email


class EmailSender:
    """Sends through ``chat.email.smtp``; one SMTP connection per message, nothing kept open
    between activities. :meth:`for_agent` gives the sender of one agent's messages."""

    max_chars = MAX_TEXT

    def __init__(self, cfg: Config, *, agent_id: str | None = None) -> None:
        self._cfg = cfg
        self._section = section(cfg)
        self._agent_id = agent_id

    def for_agent(self, agent_id: str) -> EmailSender:
        return EmailSender(self._cfg, agent_id=agent_id)

    def compose(self, chat_id: str, text: str, *, reply_to: str | None = None) -> EmailMessage:
        address = self._section.address
        if address is None:
            raise SendRefused("chat.email.address is not set: set it to the agents' address")
        if not is_address(chat_id):
            raise SendRefused(
                f"email:{chat_id} is not an email address: a channel is email:<address>, "
                "e.g. email:ann@example.com"
            )
        agent = self._agent_id
        message = EmailMessage()
        if agent:
            message["From"] = formataddr((f"{agent} (agentcomms)", plus(address, agent)))
        else:
            message["From"] = formataddr(("agentcomms", address))
        message["To"] = chat_id
        message["Subject"] = subject_of(text, reply=reply_to is not None)
        message["Date"] = formatdate(localtime=False)
        message["Message-ID"] = new_message_id(secrets.token_hex(8), agent, address)
        message["Auto-Submitted"] = "auto-generated"  # vacation responders stay quiet
        if reply_to and reply_to.startswith("<"):
            message["In-Reply-To"] = reply_to
            message["References"] = reply_to
        message.set_content(text)
        return message

    async def send_text(self, chat_id: str, text: str, *, reply_to: str | None = None) -> str:
        message = self.compose(chat_id, text, reply_to=reply_to)
        await self.send(message)
        return str(message["Message-ID"])

    async def send_attached(
        self,
        chat_id: str,
        text: str,
        files: list[tuple[str, bytes]],
        *,
        reply_to: str | None = None,
    ) -> str:
        """One message: the text, and each file attached to it as the type its name says
        (its bytes untouched, in base64)."""
        message = self.compose(chat_id, text, reply_to=reply_to)
        for name, data in files:
            guessed = mimetypes.guess_type(name)[0] or "application/octet-stream"
            maintype, _, subtype = guessed.partition("/")
            message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
        await self.send(message)
        return str(message["Message-ID"])

    async def send(self, message: EmailMessage) -> None:
        smtp = self._section.smtp
        if smtp.host is None:
            raise SendRefused("chat.email.smtp.host is not set: set it to your SMTP server")
        password = smtp.password.get_secret_value() if smtp.password else None
        client = aiosmtplib.SMTP(
            hostname=smtp.host,
            port=smtp.port or SMTP_PORTS[smtp.tls],
            use_tls=smtp.tls == "implicit",
            start_tls=False,  # upgraded below, holding the plain socket to close
            tls_context=tls_context(smtp) if smtp.tls != "none" else None,
            timeout=SMTP_TIMEOUT_S,
        )
        # Every transport the connection used: a failed TLS handshake leaves the plain one
        # open, and an SSL one closed politely waits for an answer that may never come.
        held: list[asyncio.BaseTransport | None] = []
        with smtp_errors(smtp):
            try:
                await client.connect()
                held.append(client.transport)
                if smtp.tls == "starttls":
                    await client.starttls()
                    held.append(client.transport)
                if password is not None:
                    await client.login(smtp.username or self._section.address or "", password)
                await client.send_message(message)
                with contextlib.suppress(aiosmtplib.SMTPException):
                    await client.quit()
            finally:
                for transport in held:
                    if isinstance(transport, asyncio.Transport):
                        transport.abort()
                client.close()

    async def receipt(
        self, chat_id: str, message_id: str, stage: ReceiptStage, *, note: str | None = None
    ) -> None:
        if stage not in RECEIPTS_SENT[self._section.receipts]:
            return
        text = f"{RECEIPTS[stage]}, but {note}" if note else RECEIPTS[stage]
        await self.send_text(chat_id, text, reply_to=message_id)

    async def close(self) -> None:
        pass


@contextlib.contextmanager
def smtp_errors(smtp: MailServerConfig) -> Iterator[None]:
    """SMTP's answers as SendError: a 4xx or no answer is tried again, a 5xx is what to fix."""
    where = f"the SMTP server {smtp.host}"
    try:
        yield
    except aiosmtplib.SMTPAuthenticationError as exc:
        raise SendRefused(
            f"{where} refused the login ({exc.code}): check chat.email.smtp.username and "
            "chat.email.smtp.password"
        ) from exc
    except aiosmtplib.SMTPRecipientsRefused as exc:
        refused = "; ".join(f"{e.recipient}: {e.code} {e.message}" for e in exc.recipients)
        raise SendRefused(f"{where} refused the recipient ({refused})") from exc
    except aiosmtplib.SMTPResponseException as exc:
        what = f"{where} answered {exc.code} {exc.message}"
        if 400 <= exc.code < 500:
            raise ChatProviderUnavailable(what) from exc
        raise SendRefused(what) from exc
    except aiosmtplib.SMTPException as exc:
        if isinstance(exc.__cause__, ssl.SSLCertVerificationError) or "certificate" in str(exc):
            raise SendRefused(
                f"{where}'s certificate is not trusted ({exc}): set chat.email.smtp.cafile to "
                "the CA that signed it"
            ) from exc
        if "STARTTLS" in str(exc) and "not supported" in str(exc):
            raise SendRefused(
                f"{where} does not offer STARTTLS: set chat.email.smtp.tls to implicit (port "
                "465), or to none only for a server on this machine"
            ) from exc
        raise ChatProviderUnavailable(f"{where} did not answer: {exc}") from exc
    except ssl.SSLCertVerificationError as exc:
        raise SendRefused(
            f"{where}'s certificate is not trusted ({exc.verify_message}): set "
            "chat.email.smtp.cafile to the CA that signed it"
        ) from exc
    except OSError as exc:
        raise ChatProviderUnavailable(f"{where} did not answer: {exc!r}") from exc


def receiver(cfg: Config, sink: InboundSink) -> Receiver:
    from agentcomms.transports._email_in import EmailReceiver

    return EmailReceiver(cfg, sink)


def sender(cfg: Config) -> EmailSender:
    return EmailSender(cfg)
