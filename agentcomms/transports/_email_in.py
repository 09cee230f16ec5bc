"""Email in: the gateway reads the agents' IMAP inbox (``chat.email.imap``).

- It waits with IDLE where the server offers it (a new message arrives at once), and looks every
  ``poll_s`` seconds where not; IDLE is also ended and begun again every ``poll_s``, which keeps
  the connection known to be alive.
- Every message is handled once, across restarts: how far the mailbox was read (its
  UIDVALIDITY and the last UID handled) is kept in the projection once the inbox has kept or
  refused each message; a server that numbers the mailbox anew (a new UIDVALIDITY) is read from
  the start, and a message's event id, derived from its Message-ID, keeps what was handled from
  being handled again. Mail already in the inbox when email is first switched on is left alone.
- A message goes to the agent whose email it answers (our Message-ID in In-Reply-To), else to the
  agent named by its plus-address (``agents+backend@…``), else to the chat's mapping
  (``email:ann@example.com``).
- Its sender is the From address when the operator's receiving server vouches for it
  (:func:`~agentcomms.transports._email_text.vouched_for`); otherwise ``unverified:<address>``,
  which no allowlist holds: it is recorded as a stranger's and never answered (an answer would go
  to the address it pretends to be).
- An unreachable server, or a login refused, is tried again with backoff (1 s doubling to 60 s);
  ``status`` and ``doctor`` show the state and the last error, never the password.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import ssl
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import aioimaplib

from agentcomms.config import Config
from agentcomms.errors import AttachmentRefused, VoiceNoteNotServed, VoiceNoteRefused
from agentcomms.logs import redact
from agentcomms.models import utcnow
from agentcomms.store.mail_cursors import MailCursor
from agentcomms.transports import (
    Attachment,
    InboundMessage,
    InboundResult,
    InboundSink,
    LinkStatus,
    VoiceNote,
    with_unread,
)
from agentcomms.transports._email_text import (
    agent_addressed,
    agent_answered,
    body_text,
    sender_address,
    vouched_for,
)
from agentcomms.transports.email import IMAP_PORTS, EmailSender, tls_context

log = logging.getLogger(__name__)

RETRY_FIRST_S = 1.0
RETRY_MOST_S = 60.0
IMAP_TIMEOUT_S = 30.0
# A message's first bytes are enough to read what a human wrote; the rest is not fetched.
FETCHED_BYTES = 1_000_000
# Messages read per look: a flood is taken in slices, the cursor kept after each message.
FETCHED_PER_LOOK = 200
UNVERIFIED = "unverified:"
_FETCHED = re.compile(rb"\(.*?\bUID (\d+)\b.*\{(\d+)\}\s*$")
_UIDVALIDITY = re.compile(rb"\[UIDVALIDITY (\d+)\]")
_UIDNEXT = re.compile(rb"\[UIDNEXT (\d+)\]")
_SIZE = re.compile(rb"RFC822\.SIZE (\d+)")


def attachments(message: EmailMessage) -> list[EmailMessage]:
    """The files a person attached: not the pictures the message's own HTML shows by their
    Content-ID (a signature's logo), which are its look, sent with every reply."""
    return [
        part
        for part in message.iter_attachments()
        if part.get("Content-ID") is None or part.get_content_disposition() == "attachment"
    ]


def _is_audio(part: EmailMessage) -> bool:
    return part.get_content_maintype() == "audio"


def _kind(part: EmailMessage) -> str:
    """What the human would call an attachment: image, video or file."""
    major = part.get_content_maintype()
    return major if major in ("image", "video", "audio") else "file"


class MailLoginRefused(Exception):
    """The IMAP server refused the login or the mailbox: retried, and shown until fixed."""


class _Cursors:
    """Where the cursor is kept when the sink has no projection (a test's own sink)."""

    def __init__(self) -> None:
        self._kept: dict[str, MailCursor] = {}

    async def mail_cursor(self, mailbox: str) -> MailCursor | None:
        return self._kept.get(mailbox)

    async def keep_mail_cursor(self, mailbox: str, cursor: MailCursor, now: Any) -> None:
        self._kept[mailbox] = cursor


async def _starttls(client: aioimaplib.IMAP4, context: ssl.SSLContext, host: str) -> None:
    """Upgrade a plain IMAP connection before anything secret is sent (RFC 3501 STARTTLS);
    aioimaplib has no command for it, so it is spoken through its protocol object."""
    protocol = client.protocol
    if "STARTTLS" not in protocol.capabilities:
        raise MailLoginRefused(
            "the IMAP server does not offer STARTTLS: set chat.email.imap.tls to implicit "
            "(port 993), or to none only for a server on this machine"
        )
    answer = await protocol.execute(
        aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)
    )
    if answer.result != "OK":
        raise MailLoginRefused(f"the IMAP server refused STARTTLS: {answer.result}")
    loop = asyncio.get_running_loop()
    protocol.transport = await loop.start_tls(
        protocol.transport, protocol, context, server_hostname=host
    )
    await protocol.capability()  # what the server said before TLS no longer counts


def fetched(lines: list[Any]) -> list[tuple[int, bytes]]:
    """(UID, raw message) of each message in a UID FETCH answer."""
    found = []
    for i, line in enumerate(lines[:-1]):
        if not isinstance(line, bytes | bytearray):
            continue
        match = _FETCHED.search(bytes(line))
        following = lines[i + 1]
        if match and isinstance(following, bytes | bytearray):
            found.append((int(match[1]), bytes(following)))
    return found


class EmailReceiver:
    """Reads ``chat.email.imap``'s inbox in a task of its own, for the gateway's life."""

    def __init__(self, cfg: Config, sink: InboundSink) -> None:
        self._section = cfg.chat.email
        self._sink = sink
        self._replies = EmailSender(cfg)
        self._cursors = getattr(sink, "mail_cursors", None) or _Cursors()
        imap = self._section.imap
        self._user = imap.username or self._section.address or ""
        self._port = imap.port or IMAP_PORTS[imap.tls]
        # The mailbox, as its cursor is kept in the projection.
        self.key = f"{self._user}@{imap.host}:{self._port}/{self._section.mailbox}"
        self.status = LinkStatus("connecting", since=utcnow())
        self.idle: bool | None = None  # whether the server offered IDLE, once connected
        self._task: asyncio.Task[None] | None = None
        self._client: aioimaplib.IMAP4 | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="email-receiver")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._logout()

    def routes(self) -> list[Any]:
        return []

    async def _logout(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        with contextlib.suppress(Exception):
            if client.protocol.has_pending_idle_command():
                client.idle_done()  # a logout sent inside IDLE would wait for nothing
            await asyncio.wait_for(client.logout(), 2)
        # A logout refused mid-IDLE, or a connection half made, still lets go of its socket.
        transport = getattr(client.protocol, "transport", None)
        if transport is not None:
            transport.abort()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client._client_task, 5)

    async def _run(self) -> None:
        wait = RETRY_FIRST_S
        while True:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                problem = redact(str(exc) or type(exc).__name__)
                log.warning("email: %s (trying again in %.0f s)", problem, wait)
                self.status = LinkStatus("reconnecting", problem, utcnow())
                await self._logout()
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_MOST_S)
                continue
            wait = RETRY_FIRST_S

    async def _connect(self) -> aioimaplib.IMAP4:
        imap = self._section.imap
        assert imap.host is not None
        where = f"the IMAP server {imap.host}:{self._port}"
        client: aioimaplib.IMAP4
        if imap.tls == "implicit":
            client = aioimaplib.IMAP4_SSL(
                imap.host, self._port, timeout=IMAP_TIMEOUT_S, ssl_context=tls_context(imap)
            )
        else:
            client = aioimaplib.IMAP4(imap.host, self._port, timeout=IMAP_TIMEOUT_S)
        self._client = client
        try:
            await client.wait_hello_from_server()
        except ssl.SSLCertVerificationError as exc:
            raise MailLoginRefused(
                f"{where}'s certificate is not trusted ({exc.verify_message}): set "
                "chat.email.imap.cafile to the CA that signed it"
            ) from exc
        except (OSError, TimeoutError) as exc:
            raise ConnectionError(f"{where} did not answer: {exc!r}") from exc
        if imap.tls == "starttls":
            await client.protocol.capability()
            await _starttls(client, tls_context(imap), imap.host)
        password = imap.password.get_secret_value() if imap.password else ""
        answer = await client.login(self._user, password)
        if answer.result != "OK":
            raise MailLoginRefused(
                f"{where} refused the login of {self._user}: check chat.email.imap.username "
                "and chat.email.imap.password"
            )
        return client

    async def _session(self) -> None:
        client = await self._connect()
        mailbox = self._section.mailbox
        answer = await client.select(mailbox)
        if answer.result != "OK":
            raise MailLoginRefused(f"no mailbox {mailbox!r} to read: check chat.email.mailbox")
        said = b"\n".join(bytes(x) for x in answer.lines if isinstance(x, bytes | bytearray))
        validity = _UIDVALIDITY.search(said)
        if validity is None:
            raise MailLoginRefused(f"the IMAP server gave {mailbox!r} no UIDVALIDITY")
        uidvalidity = int(validity[1])
        cursor = await self._cursors.mail_cursor(self.key)
        if cursor is None or cursor.uidvalidity != uidvalidity:
            # First start: what is already there is left alone. A mailbox numbered anew: read
            # from its start (event ids keep what was handled from being handled again).
            uidnext = _UIDNEXT.search(said)
            start = int(uidnext[1]) - 1 if cursor is None and uidnext else 0
            cursor = MailCursor(uidvalidity, start)
            await self._cursors.keep_mail_cursor(self.key, cursor, utcnow())
        self.idle = client.has_capability("IDLE")
        self.status = LinkStatus("connected", since=utcnow())
        log.info("email: reading %s (IDLE: %s)", self.key, "yes" if self.idle else "no")
        while True:
            cursor = await self._read_new(client, cursor)
            await self._wait_for_mail(client)

    async def _wait_for_mail(self, client: aioimaplib.IMAP4) -> None:
        if not self.idle:
            await asyncio.sleep(self._section.poll_s)
            await client.noop()
            return
        idle = await client.idle_start(timeout=self._section.poll_s + IMAP_TIMEOUT_S)
        with contextlib.suppress(TimeoutError):
            await client.wait_server_push(timeout=self._section.poll_s)
        client.idle_done()
        await asyncio.wait_for(idle, IMAP_TIMEOUT_S)

    async def _read_new(self, client: aioimaplib.IMAP4, cursor: MailCursor) -> MailCursor:
        while True:
            first = cursor.last_uid + 1
            last = cursor.last_uid + FETCHED_PER_LOOK
            answer = await client.uid(
                "fetch", f"{first}:{last}", f"(UID BODY.PEEK[]<0.{FETCHED_BYTES}>)"
            )
            if answer.result != "OK":
                raise ConnectionError(f"the IMAP server would not hand over mail: {answer.result}")
            # "n:m" answers with the newest message even when its UID is below n.
            found = sorted((uid, raw) for uid, raw in fetched(answer.lines) if uid >= first)
            for uid, raw in found:
                message, result = await self._handle(client, uid, cursor.uidvalidity, raw)
                cursor = MailCursor(cursor.uidvalidity, uid)
                await self._cursors.keep_mail_cursor(self.key, cursor, utcnow())
                if message is not None and result is not None:
                    await self._answer(message, result)
            if not found:
                return cursor
            if found[-1][0] < last:  # nothing further in this slice: look again after waiting
                return cursor

    def inbound(
        self, uid: int, uidvalidity: int, raw: bytes, client: aioimaplib.IMAP4 | None = None
    ) -> InboundMessage | None:
        """What a human wrote, or None for mail that is nobody's words (our own, an automatic
        answer, no single author). An audio attachment is a voice note, and otherwise the first
        attachment is a file for the agent's folder, each fetched whole through `client` only
        if the gateway wants it; other attachments are named, not passed on."""
        message = message_from_bytes(raw, policy=policy.default)
        assert isinstance(message, EmailMessage)
        address = (self._section.address or "").lower()
        author = sender_address(message)
        if author is None:
            return None
        from_address, name = author
        local, _, domain = address.partition("@")
        from_local, _, from_domain = from_address.partition("@")
        if from_domain == domain and from_local.partition("+")[0] == local:
            return None  # our own mail, come back (a copy, a bounce through a list)
        automatic = str(message.get("Auto-Submitted", "no")).strip().lower()
        if automatic != "no":
            return None  # a vacation responder or a bounce: nobody's words
        vouched = vouched_for(message, from_address, self._section.trusted_authserv_id)
        answered = agent_answered(message, address)
        text = body_text(message)
        subject = str(message.get("Subject", "")).strip()
        if answered is None and subject and not subject.lower().startswith("re:"):
            text = f"{subject}\n{text}".strip()  # a new thread: its subject is part of it
        attached = attachments(message)
        audio = next((a for a in attached if _is_audio(a)), None)
        # The first other file goes to the agent (one at a time), unless a clip is heard.
        document = next((a for a in attached if not _is_audio(a)), None)
        attachment = None
        if document is not None and audio is None and client is not None:
            attachment = Attachment(
                fetch=functools.partial(
                    self._part, client, uid, audio=False, refused=AttachmentRefused
                ),
                kind="photo" if document.get_content_maintype() == "image" else "document",
                name=document.get_filename(),
            )
        unread = [
            a for a in attached if a is not audio and (attachment is None or a is not document)
        ]
        kinds = " and ".join(dict.fromkeys(_kind(a) for a in unread))
        if attachment is not None and unread:
            kinds = "other files"
        # Nothing an agent can read still goes to the inbox, which checks the sender first.
        unreadable = (
            kinds if unread and audio is None and attachment is None and not text.strip() else None
        )
        if unread:
            text = with_unread(kinds, text).rstrip()
        voice = None
        if audio is not None and client is not None:
            voice = VoiceNote(
                fetch=functools.partial(
                    self._part, client, uid, audio=True, refused=VoiceNoteRefused
                ),
                content_type=audio.get_content_type(),
            )
        message_id = str(message.get("Message-ID", "")).strip() or f"<{uidvalidity}.{uid}@imap>"
        return InboundMessage(
            provider="email",
            chat_id=from_address,
            message_id=message_id,
            sender_id=from_address if vouched else UNVERIFIED + from_address,
            sender_name=name,
            text=text,
            chat_type="private",
            reply_to=str(message.get("In-Reply-To", "")).strip() or None,
            agent_id=answered or agent_addressed(message, address),
            voice=voice,
            attachment=attachment,
            unreadable=unreadable,
        )

    async def _part(
        self,
        client: aioimaplib.IMAP4,
        uid: int,
        max_bytes: int,
        *,
        audio: bool,
        refused: type[Exception],
    ) -> bytes:
        """The message's first audio attachment (``audio``) or first other one, fetched whole
        now (the first read took only its start, so a stranger's mail costs no more)."""
        answer = await client.uid("fetch", str(uid), "(UID RFC822.SIZE)")
        size = _SIZE.search(b" ".join(bytes(x) for x in answer.lines if isinstance(x, bytes)))
        if size is not None and int(size[1]) > max_bytes * 2:  # base64 takes 4/3 and headers
            raise refused(f"it is more than {max_bytes / 1e6:.0f} MB")
        answer = await client.uid("fetch", str(uid), "(UID BODY.PEEK[])")
        found = fetched(answer.lines)
        if answer.result != "OK" or not found:  # may be served later: the message comes again
            raise VoiceNoteNotServed("the IMAP server did not hand the message over")
        whole = message_from_bytes(found[0][1], policy=policy.default)
        assert isinstance(whole, EmailMessage)
        part = next((a for a in attachments(whole) if _is_audio(a) == audio), None)
        data = part.get_payload(decode=True) if part is not None else None
        if not isinstance(data, bytes):
            raise refused("it could not be read")
        if len(data) > max_bytes:
            raise refused(f"it is more than {max_bytes / 1e6:.0f} MB")
        return data

    async def _handle(
        self, client: aioimaplib.IMAP4, uid: int, uidvalidity: int, raw: bytes
    ) -> tuple[InboundMessage | None, InboundResult | None]:
        """Hand the message to the inbox; it is handled once this returns."""
        try:
            message = self.inbound(uid, uidvalidity, raw, client)
        except Exception as exc:  # a message nobody can read must not stop the mailbox
            log.warning("email: UID %d could not be read, skipped: %s", uid, exc)
            return None, None
        if message is None:
            return None, None
        result = await self._sink.accept(message)  # raises: not kept, read again next session
        return message, result

    async def _answer(self, message: InboundMessage, result: InboundResult) -> None:
        """Send the inbox's answer (a pairing code, an approval's outcome) in the thread of the
        message it answers; never to a sender the server did not vouch for, since the answer
        would go to the address they pretend to be."""
        if not result.reply or message.sender_id.startswith(UNVERIFIED):
            return
        sender = self._replies.for_agent(result.agent_id) if result.agent_id else self._replies
        try:
            await sender.send_text(message.chat_id, result.reply, reply_to=message.message_id)
        except Exception as exc:
            log.warning("email: the answer to %s was not sent: %s", message.chat_id, exc)
