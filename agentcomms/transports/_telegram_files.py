"""Telegram's files, fetched through the Bot API (``getFile``, then the file URL under
``base_file_url``) only when the gateway asks: a voice note to hear, a photo (its largest size) or
a document to save in the agent's folder. A stranger's are never fetched."""

from __future__ import annotations

import warnings
from datetime import timedelta
from typing import Any, Literal

from telegram import Audio, Document, Message, PhotoSize, Voice
from telegram.error import BadRequest
from telegram.warnings import PTBDeprecationWarning

from agentcomms.errors import AttachmentRefused, VoiceNoteRefused
from agentcomms.transports import Attachment, VoiceNote


def seconds(value: Any) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def voice_note(medium: Voice | Audio) -> VoiceNote:
    """A voice note (or audio file) to fetch through the Bot API when the gateway wants it."""

    async def fetch(max_bytes: int) -> bytes:
        return await _download(medium, max_bytes, VoiceNoteRefused)

    with warnings.catch_warnings():  # as retry_after: an int today, a timedelta later
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        duration: Any = medium.duration
    return VoiceNote(
        fetch=fetch,
        content_type=medium.mime_type or "audio/ogg",
        duration_s=seconds(duration) if duration is not None else None,
        size=medium.file_size,
    )


def attachment(message: Message) -> Attachment | None:
    """A photo (its largest size) or document to fetch through the Bot API when the gateway
    wants it."""
    medium: PhotoSize | Document
    kind: Literal["photo", "document"]
    if message.photo:
        medium, kind, name = message.photo[-1], "photo", None
    elif message.document is not None:
        medium, kind, name = message.document, "document", message.document.file_name
    else:
        return None

    async def fetch(max_bytes: int) -> bytes:
        return await _download(medium, max_bytes, AttachmentRefused)

    return Attachment(fetch=fetch, kind=kind, name=name, size=medium.file_size)


async def _download(
    medium: Voice | Audio | PhotoSize | Document, max_bytes: int, refused: type[Exception]
) -> bytes:
    """The file's bytes; ``refused`` (for the human) when Telegram will never hand it over."""
    try:
        file = await medium.get_file()
    except BadRequest as exc:  # "file is too big" (over the Bot API's 20 MB), or gone
        raise refused(f"Telegram would not hand it over ({exc.message})") from exc
    if file.file_size and file.file_size > max_bytes:
        raise refused(
            f"it is {file.file_size / 1e6:.1f} MB, more than the {max_bytes / 1e6:.1f} MB it may "
            "take"
        )
    return bytes(await file.download_as_bytearray())
