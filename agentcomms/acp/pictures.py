"""A picture a human sent to a process agent, as its prompt carries it: an ACP ``image`` block
(base64, with its type) where the agent's ``initialize`` says it takes images; its message's text
names the saved file's path either way."""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# An image larger than this goes as its saved path only: its base64 travels in one JSON line.
IMAGE_BYTES = 10 * 1024 * 1024
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@dataclass(frozen=True)
class Picture:
    """An image a human sent, saved in the agent's folder: a prompt carries it as an image block
    where the agent takes them (its text always names the saved file's path)."""

    path: Path
    mime_type: str


def image_blocks(pictures: Sequence[Picture], cwd: Path) -> list[dict[str, Any]]:
    """ACP image blocks of the pictures saved in the agent's attachments folder; one that is
    elsewhere, of another type, too large or gone is left to the path its message names."""
    folder = (cwd / ".agentcomms" / "attachments").resolve()
    blocks = []
    for picture in pictures:
        path = picture.path.resolve()
        try:
            fits = path.is_relative_to(folder) and path.stat().st_size <= IMAGE_BYTES
            data = path.read_bytes() if fits and picture.mime_type in IMAGE_TYPES else None
        except OSError:
            data = None
        if data is None:
            log.warning("%s goes as its path only (not a saved image within the cap)", path)
            continue
        encoded = base64.b64encode(data).decode("ascii")
        blocks.append({"type": "image", "mimeType": picture.mime_type, "data": encoded})
    return blocks
