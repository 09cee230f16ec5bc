"""HTTP/1.1 written by hand, as an attacker writes it: a body that is shorter than it claims, or
one that never ends, to see what a door answers before the body is read whole."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

# Long enough for a loaded machine; a door that waited for the rest of the body never answers.
ANSWER_TIMEOUT_S = 30


@dataclass
class Answer:
    status: int
    text: str
    sent: int  # body bytes written when the answer came


async def knock(
    port: int,
    path: str,
    headers: dict[str, str],
    *,
    body: bytes = b"",
    chunks: Iterable[bytes] = (),
    method: str = "POST",
) -> Answer:
    """Send the request line, ``headers``, ``body`` and then each of ``chunks`` (chunked
    encoding, never finished), and read the answer without sending anything more."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = 0

    async def write() -> None:
        nonlocal sent
        head = f"{method} {path} HTTP/1.1\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
        writer.write(head.encode() + body)
        sent = len(body)
        await writer.drain()
        for chunk in chunks:
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
            sent += len(chunk)

    # The answer is read while the body is still being written, as a browser or an HTTP client
    # does: a door that closes on an unread body resets the connection, and whatever was not
    # read by then is lost.
    writing = asyncio.create_task(write())
    try:
        status_line = await asyncio.wait_for(reader.readline(), ANSWER_TIMEOUT_S)
        length = 0
        while (line := await asyncio.wait_for(reader.readline(), ANSWER_TIMEOUT_S)) not in (
            b"\r\n",
            b"",
        ):
            name, _, value = line.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        sent_by_then = sent
        if method == "HEAD":  # its Content-Length is the GET's, its body none
            length = 0
        text = await asyncio.wait_for(reader.readexactly(length), ANSWER_TIMEOUT_S)
        return Answer(int(status_line.split()[1]), text.decode(), sent_by_then)
    finally:
        writing.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await writing
        writer.close()
