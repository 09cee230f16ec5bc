"""Files an agent sends its human with a message (MCP ``send_message``'s ``files``).

Each path must lie in the agent's own folder (a pane's current path, a process agent's folder)
once every link is followed: an agent may send what it works on, never ``~/.ssh`` nor a link
pointing there. The gateway reads the folder as the agent's host does, so only an agent on the
gateway's machine may send files (as only such an agent receives them). The file is checked here
(a regular file, within ``chat.max_file_bytes``) and its digest signed with the message; the
send reads it again and sends it only if its bytes are still those, so nothing travels through
Temporal but its path and digest.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from pathlib import Path

from agentcomms import transports
from agentcomms.config import Config, agentcomms_home
from agentcomms.errors import AttachmentRefused, RpcError
from agentcomms.outbox_models import FileRef
from agentcomms.store import Store
from gateway.chat.attachments import Whereabouts, agent_folder, whereabouts
from gateway.socket.protocol import INVALID_PARAMS
from workflows.mailbox.client import Mailbox

# More than a handful is a folder's worth: a human reads them in a chat one by one.
MAX_FILES = 10


async def files_to_send(
    paths: list[str], *, where: Whereabouts | None, host: str, agent_id: str, max_bytes: int
) -> list[FileRef]:
    """The files at ``paths`` (absolute, or relative to the agent's folder), checked; raises
    :class:`AttachmentRefused` naming the path that may not go, and why."""
    if len(paths) > MAX_FILES:
        raise AttachmentRefused(f"at most {MAX_FILES} files go with one message")
    folder = await agent_folder(where, host, agent_id)
    return [await asyncio.to_thread(checked_file, path, folder, max_bytes) for path in paths]


def checked_file(path: str, folder: str, max_bytes: int, *, home: Path | None = None) -> FileRef:
    """``path`` read as the agent means it, checked to lie in ``folder`` once every link is
    followed, outside agentcomms' own folder ``home`` and hidden folders, to be a regular file
    and to fit ``max_bytes``."""
    root = os.path.realpath(folder)
    real = os.path.realpath(os.path.join(root, path))
    if os.path.commonpath([root, real]) != root:
        raise AttachmentRefused(
            f"{path}: only files in your own folder ({root}) may be sent, and this one is "
            f"{real}. Copy it into your folder first."
        )
    own = os.path.realpath(home or agentcomms_home())
    if os.path.commonpath([own, real]) == own:
        raise AttachmentRefused(f"{path}: agentcomms' own folder ({own}) is never sent")
    # An agent working in a home folder has ~/.ssh and ~/.aws in it: what is hidden stays.
    inside = Path(os.path.relpath(real, root)).parts
    if any(part.startswith(".") for part in inside) and inside[:2] != (
        ".agentcomms",
        "attachments",
    ):
        raise AttachmentRefused(
            f"{path}: hidden files and folders (a name starting with '.') are not sent. Copy "
            "it to a visible name first."
        )
    try:  # not blocking: a named pipe must not hold the gateway up
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise AttachmentRefused(f"{path}: no such file in {root}") from None
    except OSError as exc:
        raise AttachmentRefused(f"{path}: cannot be read ({exc.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise AttachmentRefused(f"{path}: not a file (a folder or a device); send files only")
    with os.fdopen(fd, "rb") as file:
        if info.st_size > max_bytes:
            raise AttachmentRefused(
                f"{path}: {info.st_size / 1e6:.1f} MB, more than the {max_bytes / 1e6:.1f} MB a "
                "file may take (chat.max_file_bytes)"
            )
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise AttachmentRefused(f"{path}: it grew past {max_bytes / 1e6:.1f} MB while read")
    return FileRef(
        path=real, name=Path(real).name, sha256=hashlib.sha256(data).hexdigest(), size=len(data)
    )


async def files_for_reply(
    cfg: Config,
    store: Store,
    mailbox: Mailbox,
    host: str,
    agent_id: str,
    provider: str,
    paths: list[str],
) -> list[FileRef]:
    """The checked files of an agent's message to a ``provider`` chat; an invalid-params error
    naming what may not go otherwise."""
    if not paths:
        return []
    if not transports.abilities(provider).files:
        carries = ", ".join(n for n, a in transports.ABILITIES.items() if a.files)
        raise RpcError(
            INVALID_PARAMS,
            f"files: {provider} carries no files, so nothing was sent; send the words alone "
            f"there, and the files to a chat that carries them ({carries})",
        )
    where = await whereabouts(store, mailbox, agent_id)
    try:
        return await files_to_send(
            paths, where=where, host=host, agent_id=agent_id, max_bytes=cfg.chat.max_file_bytes
        )
    except AttachmentRefused as exc:
        raise RpcError(INVALID_PARAMS, f"files: {exc}; nothing was sent") from None
