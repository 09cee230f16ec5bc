"""A real IRC server for tests (Debian's ngircd, on a free loopback port, with its own config
and no DNS or ident lookups, so a client's mask is ``nick!~user@127.0.0.1``) and a human's IRC
client speaking the protocol by hand."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentcomms.transports.irc import Line, parse
from tests.fakes.serve import free_port
from tests.support.tls_proxy import make_pki

NGIRCD = shutil.which("ngircd") or "/usr/sbin/ngircd"


def mask(nick: str, user: str) -> str:
    """How the test server names a client (no ident: ``~``; no DNS: the address)."""
    return f"{nick}!~{user}@127.0.0.1"


@dataclass(frozen=True)
class IrcServer:
    port: int  # plain
    tls_port: int  # TLS, with a certificate for 127.0.0.1 that `ca` signed
    ca: Path


@contextlib.contextmanager
def running_ircd(root: Path) -> Iterator[IrcServer]:
    """An ngircd of its own, its files under `root`, on a plain port and a TLS one."""
    if not Path(NGIRCD).exists():
        pytest.fail("ngircd is not installed: apt-get install ngircd (.ci/run does)")
    port, tls_port = free_port(), free_port()
    pki = make_pki(root / "pki")
    for path in (pki.server_cert, pki.server_key):
        path.chmod(0o644)  # ngircd reads them as the user it runs as
    conf = root / "ngircd.conf"
    conf.write_text(
        "[Global]\n"
        "  Name = irc.test\n"
        "  Info = agentcomms tests\n"
        "  Listen = 127.0.0.1\n"
        f"  Ports = {port}\n"
        f"  PidFile = {root}/ngircd.pid\n"
        "  MotdPhrase = tests\n"
        "[Limits]\n"
        "  MaxNickLength = 30\n"
        "  MaxConnectionsIP = 0\n"
        "[Options]\n"
        "  DNS = no\n"
        "  Ident = no\n"
        "  PAM = no\n"
        "[SSL]\n"
        f"  CertFile = {pki.server_cert}\n"
        f"  KeyFile = {pki.server_key}\n"
        f"  Ports = {tls_port}\n"
    )
    server = subprocess.Popen(
        [NGIRCD, "-n", "-f", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            if server.poll() is not None:
                pytest.fail(f"ngircd exited with {server.returncode} (config {conf})")
            time.sleep(0.05)
        yield IrcServer(port, tls_port, pki.ca)
    finally:
        server.terminate()
        server.wait(10)


class Human:
    """A person on IRC: connects, joins, says things, and reads what reaches them."""

    def __init__(self, port: int, nick: str, user: str) -> None:
        self.port, self.nick, self.user = port, nick, user
        self.heard: list[Line] = []
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def mask(self) -> str:
        return mask(self.nick, self.user)

    async def connect(self, *channels: str) -> None:
        self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        self._send(f"NICK {self.nick}")
        self._send(f"USER {self.user} 0 * :{self.nick}")
        while (line := await self._read()).command != "001":
            if line.command == "433":
                raise AssertionError(f"nick {self.nick} is taken")
        for channel in channels:
            self._send(f"JOIN {channel}")
            while not ((line := await self._read()).command == "JOIN" and line.nick == self.nick):
                pass
        self._task = asyncio.create_task(self._listen())

    def _send(self, raw: str) -> None:
        assert self._writer is not None
        self._writer.write(raw.encode() + b"\r\n")

    async def _read(self) -> Line:
        assert self._reader is not None
        raw = await self._reader.readline()
        if not raw:
            raise ConnectionError("closed")
        line = parse(raw.decode().rstrip("\r\n"))
        if line.command == "PING":
            self._send(f"PONG :{line.params[-1]}")
        return line

    async def _listen(self) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                self.heard.append(await self._read())

    def says(self, target: str, text: str) -> None:
        self._send(f"PRIVMSG {target} :{text}")

    def told(self, where: str | None = None) -> list[str]:
        """The texts of the PRIVMSGs that reached this person (in `where`: a channel, or
        privately when `where` is their own nick)."""
        return [
            line.params[1]
            for line in self.heard
            if line.command == "PRIVMSG" and (where is None or line.params[0] == where)
        ]

    async def quit(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(OSError):
                self._send("QUIT :bye")
                await self._writer.drain()
                self._writer.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@contextlib.asynccontextmanager
async def on_irc(port: int, nick: str, user: str, *channels: str) -> AsyncIterator[Human]:
    human = Human(port, nick, user)
    await human.connect(*channels)
    try:
        yield human
    finally:
        await human.quit()
