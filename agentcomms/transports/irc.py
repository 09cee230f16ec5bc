"""IRC (``chat.irc``): channels ``irc:#ops`` (a channel the deployment's nick joins) and
``irc:alice`` (a private conversation with a nick).

Receiving: one connection (TLS by default, the server's password if it asks), registered as
``chat.irc.nick`` (with ``_`` added while the nick is taken), joining ``chat.irc.channels``, and
reconnecting with backoff. Each ``PRIVMSG`` to a channel or to the nick is one message. Who sent
it is what the server vouches for: the services account where the server tags messages with
it (IRCv3 ``account-tag``: sender id ``account:NAME``), otherwise the full ``nick!user@host``
mask. A nick alone is never a sender: anyone may take a free nick. IRC has no message ids,
so each message is an event of its own; nothing is sent twice by a server.

Sending: through the receiving connection when it runs in this process (``agentcomms up``);
otherwise (a worker on its own) through a short connection of its own, as the nick with
``-out`` added, which joins a channel to speak in it. A line carries 400 bytes: a longer text,
or one of several lines, goes as several messages. IRC has no reactions and no buttons:
receipts are not sent, and approvals are answered with a reply code, as by SMS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import uuid
from dataclasses import dataclass, field

from starlette.routing import BaseRoute

from agentcomms.config import Config, IrcConfig
from agentcomms.errors import ChatProviderUnavailable, SendRefused
from agentcomms.models import utcnow
from agentcomms.transports import InboundMessage, InboundSink, LinkStatus, ReceiptStage

log = logging.getLogger(__name__)

LINE_BYTES = 400  # of text in one PRIVMSG: a line is 512 bytes with its prefix and command
MAX_TEXT = 2_000  # of a message, sent as lines of LINE_BYTES (a longer text: several sends)
CONNECT_TIMEOUT_S = 20.0
# How long the server may take to handle what a send wrote (it throttles about a line a second
# past a burst, ngircd half a second): a text of MAX_TEXT goes as five lines, or at most a few
# dozen short ones.
SYNC_TIMEOUT_S = 60.0
RETRY_S = (1.0, 2.0, 5.0, 15.0, 30.0)
CHANNEL_PREFIXES = ("#", "&")
# A connection of this process that is registered, by (host, port, nick): a send goes through it.
_LIVE: dict[tuple[str, int, str], IrcConnection] = {}


@dataclass
class Line:
    """One IRC line: its tags, the prefix (who sent it), the command and its parameters."""

    command: str
    params: list[str] = field(default_factory=list)
    prefix: str = ""
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def nick(self) -> str:
        return self.prefix.partition("!")[0]


def parse(raw: str) -> Line:
    tags: dict[str, str] = {}
    if raw.startswith("@"):
        head, _, raw = raw.partition(" ")
        for tag in head[1:].split(";"):
            key, _, value = tag.partition("=")
            tags[key] = value
    prefix = ""
    if raw.startswith(":"):
        prefix, _, raw = raw[1:].partition(" ")
    head, sep, trailing = raw.partition(" :")
    params = head.split()
    command = params.pop(0).upper() if params else ""
    if sep:
        params.append(trailing)
    return Line(command, params, prefix, tags)


def clean(text: str) -> str:
    """What may go into one IRC parameter: no line breaks or NULs."""
    return text.replace("\r", " ").replace("\n", " ").replace("\0", "")


def lines_of(text: str) -> list[str]:
    """`text` as IRC lines of at most LINE_BYTES bytes each (a line break starts a new one)."""
    out: list[str] = []
    for line in text.splitlines() or [""]:
        line = clean(line)
        while len(line.encode()) > LINE_BYTES:
            cut = LINE_BYTES
            while len(line[:cut].encode()) > LINE_BYTES:
                cut -= 1
            space = line.rfind(" ", 0, cut)
            cut = space + 1 if space > cut // 2 else cut
            out.append(line[:cut].rstrip())
            line = line[cut:]
        out.append(line if line.strip() else " ")
    return out


class IrcConnection:
    """One registered connection: reads lines into `on_line`, writes what it is given."""

    def __init__(self, section: IrcConfig, nick: str) -> None:
        self._section = section
        self.nick = nick
        self._writer: asyncio.StreamWriter | None = None
        self._reader: asyncio.StreamReader | None = None
        self.caps: set[str] = set()
        self.joined: set[str] = set()

    async def connect(self) -> None:
        """Connect and register; raises ChatProviderUnavailable when the server will not have us."""
        s = self._section
        assert s.host is not None
        context = None
        if s.tls:
            context = ssl.create_default_context(cafile=s.cafile)
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(s.host, s.port, ssl=context), CONNECT_TIMEOUT_S
            )
            await asyncio.wait_for(self._register(), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            await self.close()
            raise ChatProviderUnavailable(
                f"IRC server {s.host}:{s.port} did not take us: {type(exc).__name__}: {exc}"
            ) from exc

    async def _register(self) -> None:
        self.send("CAP LS 302")
        if self._section.password is not None:
            self.send(f"PASS {clean(self._section.password.get_secret_value())}")
        self.send(f"NICK {self.nick}")
        self.send(f"USER {self.nick[:10]} 0 * :agentcomms")
        while True:
            line = await self.read()
            if line.command == "CAP" and len(line.params) >= 3:
                await self._negotiate(line)
            elif line.command == "001":
                self.nick = line.params[0] if line.params else self.nick
                return
            elif line.command in ("432", "433", "436"):  # taken, or refused: another
                self.nick = (self.nick + "_")[:30]
                self.send(f"NICK {self.nick}")
            elif line.command in ("464", "465", "ERROR"):
                raise OSError(f"{line.command} {' '.join(line.params)}")

    async def _negotiate(self, line: Line) -> None:
        sub = line.params[1].upper()
        if sub == "LS":
            offered = {c.partition("=")[0] for c in line.params[-1].split()}
            wanted = offered & {"account-tag"}
            if wanted and line.params[2] != "*":
                self.send(f"CAP REQ :{' '.join(sorted(wanted))}")
            elif line.params[2] != "*":
                self.send("CAP END")
        elif sub in ("ACK", "NAK"):
            if sub == "ACK":
                self.caps |= set(line.params[-1].split())
            self.send("CAP END")

    def send(self, raw: str) -> None:
        if self._writer is None:
            raise ChatProviderUnavailable("the IRC connection is closed")
        self._writer.write(raw.encode() + b"\r\n")

    async def read(self) -> Line:
        assert self._reader is not None
        raw = await self._reader.readline()
        if not raw:
            raise ConnectionError("the IRC server closed the connection")
        line = parse(raw.decode(errors="replace").rstrip("\r\n"))
        if line.command == "PING":
            self.send(f"PONG :{line.params[-1] if line.params else ''}")
        return line

    async def say(self, target: str, text: str) -> None:
        """PRIVMSG `text` to `target`, joining a channel first."""
        if target.startswith(CHANNEL_PREFIXES) and target.lower() not in self.joined:
            self.join(target)
        for line in lines_of(text):
            self.send(f"PRIVMSG {target} :{line}")
        assert self._writer is not None
        try:
            await self._writer.drain()
        except OSError as exc:
            raise ChatProviderUnavailable(f"the IRC connection broke: {exc}") from exc

    async def synced(self) -> None:
        """Return once the server has handled everything sent before: it throttles a client
        that sends many lines, and drops what it has not handled yet when the client quits."""
        token = uuid.uuid4().hex[:12]
        self.send(f"PING :{token}")
        async with asyncio.timeout(SYNC_TIMEOUT_S):
            while not ((line := await self.read()).command == "PONG" and token in line.params):
                pass

    def join(self, channel: str) -> None:
        self.send(f"JOIN {channel}")
        self.joined.add(channel.lower())

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(OSError):
                writer.write(b"QUIT :bye\r\n")
                writer.close()
                await writer.wait_closed()


def sender_of(line: Line) -> str:
    """Who sent `line`, as the server vouches for it: ``account:NAME`` or the full mask."""
    account = line.tags.get("account")
    if account and account != "*":
        return f"account:{account}"
    return line.prefix


class IrcReceiver:
    def __init__(self, cfg: Config, sink: InboundSink) -> None:
        self._section = cfg.chat.irc
        self._sink = sink
        self.status = LinkStatus("connecting", since=utcnow())
        self._task: asyncio.Task[None] | None = None
        self._conn: IrcConnection | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="irc")

    async def _run(self) -> None:
        tries = 0
        s = self._section
        assert s.host is not None
        key = (s.host, s.port, s.nick)
        while True:
            conn = IrcConnection(s, s.nick)
            try:
                await conn.connect()
                for channel in s.channels:
                    conn.join(channel)
                self._conn = _LIVE[key] = conn
                self.status = LinkStatus("connected", since=utcnow())
                tries = 0
                while True:
                    await self._take(conn, await conn.read())
            except (ChatProviderUnavailable, ConnectionError, OSError) as exc:
                _LIVE.pop(key, None)
                self._conn = None
                await conn.close()
                wait = RETRY_S[min(tries, len(RETRY_S) - 1)]
                tries += 1
                self.status = LinkStatus("reconnecting", str(exc), since=utcnow())
                log.warning("irc: %s; connecting again in %s s", exc, wait)
                await asyncio.sleep(wait)

    async def _take(self, conn: IrcConnection, line: Line) -> None:
        if line.command != "PRIVMSG" or len(line.params) < 2 or "!" not in line.prefix:
            return
        target, text = line.params[0], line.params[1]
        if text.startswith("\x01"):  # CTCP (a /me, a VERSION): not words for an agent
            return
        private = not target.startswith(CHANNEL_PREFIXES)
        # Nicks and channel names are the same whatever their case: one chat, as mapped.
        chat = (line.nick if private else target).lower()
        message = InboundMessage(
            provider="irc",
            chat_id=chat,
            message_id=uuid.uuid4().hex,
            sender_id=sender_of(line),
            sender_name=line.nick,
            text=text,
            chat_type="private" if private else "group",
        )
        try:
            result = await self._sink.accept(message)
        except Exception as exc:  # not kept: IRC sends nothing again, so the sender is told
            log.warning("irc: a message from %s was not kept: %s", line.prefix, exc)
            await conn.say(chat, f"{line.nick}: not delivered, please send it again in a minute")
            return
        if result.reply:
            await conn.say(chat, result.reply)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._conn is not None:
            s = self._section
            _LIVE.pop((s.host or "", s.port, s.nick), None)
            await self._conn.close()
            self._conn = None

    def routes(self) -> list[BaseRoute]:
        return []


class IrcSender:
    max_chars = MAX_TEXT

    def __init__(self, cfg: Config) -> None:
        self._section = cfg.chat.irc

    async def send_text(self, chat_id: str, text: str, *, reply_to: str | None = None) -> str:
        s = self._section
        if s.host is None:
            raise SendRefused("chat.irc.host is not set")
        if not chat_id or any(c in chat_id for c in " ,\r\n\0"):
            raise SendRefused(f"{chat_id!r} is not an IRC channel or nick")
        live = _LIVE.get((s.host, s.port, s.nick))
        if live is not None:
            await live.say(chat_id, text)
            return uuid.uuid4().hex
        conn = IrcConnection(s, f"{s.nick}-out"[:30])
        await conn.connect()
        try:
            await conn.say(chat_id, text)
            await conn.synced()
        except (TimeoutError, ConnectionError) as exc:
            raise ChatProviderUnavailable(f"IRC server did not take it all: {exc!r}") from exc
        finally:
            await conn.close()
        return uuid.uuid4().hex

    async def receipt(
        self, chat_id: str, message_id: str, stage: ReceiptStage, *, note: str | None = None
    ) -> None:
        # No reactions on IRC, and a line per message typed would drown a channel.
        return None

    async def close(self) -> None:
        pass


def receiver(cfg: Config, sink: InboundSink) -> IrcReceiver:
    return IrcReceiver(cfg, sink)


def sender(cfg: Config) -> IrcSender:
    return IrcSender(cfg)
