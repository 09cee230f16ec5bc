"""A human's photo or document, saved where the agent works: ``.agentcomms/attachments/``.

The gateway fetches it, after the allowlist and routing (a stranger's file is never downloaded)
and before the message is posted, as it hears a voice note: a provider is acknowledged only
once its message is durable, and the message then carries the saved file's path. The file is
written by the gateway, so only an agent on the gateway's own machine gets it: the agent's host
is another machine's worker otherwise, and its folder is out of the gateway's reach. Such a file
is refused with a reply that says so, rather than carried through Temporal.

The folder is the agent's: a pane's current path (asked of its tmux server, where the projection
says the pane is), a process agent's folder (in its registration, which its mailbox keeps). The type is read from the bytes, never from the sender's name or the provider's
word: images (PNG, JPEG, GIF, WebP), PDF and UTF-8 text only. The saved name is the message's
event id and what is safe of the sender's name, so a file sent again replaces its copy.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from pathlib import Path

from agentcomms.bridge.client import run_client
from agentcomms.config import agentcomms_home
from agentcomms.errors import AttachmentRefused, BridgeError
from agentcomms.models import AgentType
from agentcomms.store import Store
from agentcomms.transports import Attachment
from workflows.mailbox.client import Mailbox

FOLDER = Path(".agentcomms") / "attachments"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NAME_CHARS = 60
# Control characters a text file has no business holding (tab, line feed, form feed and
# carriage return are text).
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class Whereabouts:
    """Where an agent runs, as far as a file for it matters."""

    type: AgentType
    host: str
    target: str  # its pane
    socket: str | None = None  # its pane's tmux server
    cwd: str | None = None  # a process agent's folder


async def whereabouts(store: Store, mailbox: Mailbox, agent_id: str) -> Whereabouts | None:
    """Where ``agent_id`` runs; None when it is not registered."""
    agent = await store.get_agent(agent_id)
    if agent is None or agent.target is None or agent.host is None:
        return None
    if agent.type == "tmux":
        return Whereabouts("tmux", agent.host, agent.target, agent.tmux_socket)
    snapshot = await mailbox.snapshot(agent_id)
    registration = snapshot.registration if snapshot is not None else None
    if registration is None:
        return None
    return Whereabouts("process", registration.host, registration.target, cwd=registration.cwd)


@dataclass(frozen=True)
class Saved:
    path: Path  # absolute, in the agent's folder
    content_type: str
    size: int


def sniff(data: bytes) -> tuple[str, str] | None:
    """The content type and file extension ``data`` is, by its own bytes; None for a type an
    agent is not given (an executable, an archive, anything unknown)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png", ".png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg", ".jpg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif", ".gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp", ".webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf", ".pdf"
    if data and not _CONTROL.search(data):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return "text/plain", ".txt"
    return None


def saved_name(event_id: str, name: str | None, extension: str) -> str:
    """``<event id>-<the sender's name, made safe><extension>``: never a path, never hidden,
    and the extension is the one the bytes earned."""
    stem = _UNSAFE.sub("_", Path(name).stem if name else "").strip("._-")[:_NAME_CHARS]
    return f"{event_id}-{stem}{extension}" if stem else f"{event_id}{extension}"


def folder_on_this_host(where: Whereabouts | None, host: str, agent_id: str) -> str:
    """Where a file for the agent goes, before asking its pane: a process agent's folder, or
    "" for a pane (whose current path is asked next). Refuses an agent not on ``host``."""
    if where is None:
        raise AttachmentRefused(
            f"{agent_id} is not running, so there is no folder to save it in. Send it again "
            "once the agent is registered."
        )
    if where.host != host:
        raise AttachmentRefused(
            f"files reach only agents on the gateway's machine ({host}), and {agent_id} runs "
            f"on {where.host}. Put the file there yourself, or send its words as text."
        )
    if where.type == "process":
        if not where.cwd:
            raise AttachmentRefused(f"{agent_id} has no folder to save it in")
        return where.cwd
    return ""


async def agent_folder(
    where: Whereabouts | None, host: str, agent_id: str, *, tmux: str = "tmux"
) -> str:
    """The folder the agent works in, on ``host`` (the gateway's): refused for an agent that is
    not registered or runs elsewhere."""
    folder = folder_on_this_host(where, host, agent_id)
    if folder or where is None:
        return folder
    try:
        out = await run_client(
            tmux,
            where.socket,
            ["display-message", "-p", "-t", where.target, "#{pane_current_path}"],
            stdin=None,
            timeout=5.0,
        )
    except BridgeError as exc:
        raise AttachmentRefused(
            f"{agent_id}'s pane could not be asked for its folder ({exc})"
        ) from exc
    path = out.strip()
    if not path.startswith("/"):
        raise AttachmentRefused(f"{agent_id}'s pane has no folder")
    return path


class Attachments:
    """Fetching, checking and saving what humans send, for agents on the gateway's host."""

    def __init__(
        self, host: str, max_bytes: int, *, tmux: str = "tmux", home: Path | None = None
    ) -> None:
        self._home = home or agentcomms_home()
        self._host = host
        self._max_bytes = max_bytes
        self._tmux = tmux

    async def save(
        self,
        event_id: str,
        attachment: Attachment,
        agent_id: str,
        where: Whereabouts | None,
    ) -> Saved:
        """Fetch the file and save it in the agent's folder. Raises :class:`AttachmentRefused`
        for good; any other error means it may work later (the provider fetch failed)."""
        folder = await agent_folder(where, self._host, agent_id, tmux=self._tmux)
        if attachment.size is not None and attachment.size > self._max_bytes:
            raise AttachmentRefused(self._too_large(attachment.size))
        data = await attachment.fetch(self._max_bytes)
        if len(data) > self._max_bytes:
            raise AttachmentRefused(self._too_large(len(data)))
        sniffed = sniff(data)
        if sniffed is None:
            raise AttachmentRefused(
                "it is not a type an agent is given: images (PNG, JPEG, GIF, WebP), PDF and "
                "plain text are"
            )
        content_type, extension = sniffed
        name = saved_name(event_id, attachment.name, extension)
        path = await asyncio.to_thread(_write, Path(folder), name, data, self._home)
        return Saved(path, content_type, len(data))

    def _too_large(self, size: int) -> str:
        return (
            f"it is {size / 1e6:.1f} MB, more than the {self._max_bytes / 1e6:.1f} MB a file may "
            "take (chat.max_file_bytes)"
        )


def _write(folder: Path, name: str, data: bytes, home: Path) -> Path:
    if not folder.is_dir():
        raise AttachmentRefused(f"the agent's folder {folder} is gone")
    if (folder / FOLDER.parent).resolve() == home.resolve():
        # An agent in the home folder: its .agentcomms is agentcomms' own, which holds the
        # deployment's key and which no agent may read.
        raise AttachmentRefused(
            f"the agent works in {folder}, whose .agentcomms is agentcomms' own folder. Start "
            "it in a project folder to receive files."
        )
    target = folder / FOLDER
    # Owner-only: what a human sends an agent is for that agent's user alone.
    target.mkdir(parents=True, exist_ok=True, mode=0o700)
    target.chmod(0o700)
    path = target / name
    tmp = target / f".{name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    tmp.replace(path)  # a file sent again replaces its copy, never mixes with it
    return path
