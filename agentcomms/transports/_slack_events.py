"""What Slack delivers, read as agentcomms sees it: a ``message`` event as an
:class:`~agentcomms.transports.InboundMessage`, a ``block_actions`` payload as a
:class:`~agentcomms.transports.ButtonPress`, Slack's markup as the words a person wrote, and a
request to the Events API's URLs checked against the app's signing secret before its body is
read as anything (:class:`SignedRequests`). No network here.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentcomms.transports import Attachment, ButtonPress, InboundMessage, VoiceNote, with_unread
from agentcomms.transports._slack_sender import message_ref

NAME = "slack"
# Message events a person's words arrive in: a plain one, a thread reply also sent to the
# channel, one with files. The rest (edits, joins, bots, the app's own) reach no agent.
TAKEN_SUBTYPES = (None, "thread_broadcast", "file_share")
# Slack's own advice: refuse a request whose timestamp is five minutes off; the gateway also
# remembers the signatures it took for as long as their timestamp passes, so none is taken twice.
MAX_AGE_S = 300
REMEMBERED_SIGNATURES = 10_000

_MARKUP = re.compile(r"<([^<>|]*)(?:\|([^<>]*))?>")


def plain(text: str) -> str:
    """Slack's markup as a person wrote it: ``<@U1>`` → ``@U1``, ``<#C1|dev>`` → ``#dev``,
    ``<!here>`` → ``@here``, ``<https://x|the docs>`` → ``the docs (https://x)``, and the
    ``&amp;`` ``&lt;`` ``&gt;`` escapes undone (last, so an escaped ``&lt;`` stays text)."""

    def one(match: re.Match[str]) -> str:
        target, label = match[1], match[2]
        if target.startswith("@"):
            return f"@{label or target[1:]}"
        if target.startswith("#"):
            return f"#{label or target[1:]}"
        if target.startswith("!"):
            special = target[1:].split("^", 1)[0]
            return f"@{label or special}"
        return f"{label} ({target})" if label and label != target else target

    text = _MARKUP.sub(one, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


# A file of one of these types is a voice clip, heard before it is typed (Slack records clips
# as audio/webm or audio/mp4; an audio file sent is the same to the agent).
AUDIO = "audio/"
IMAGE = "image/"


def inbound(
    event: dict[str, Any],
    *,
    own_user: str | None,
    voice: Callable[[dict[str, Any]], VoiceNote] | None = None,
    attach: Callable[[dict[str, Any]], Attachment] | None = None,
) -> InboundMessage | None:
    """A ``message`` event as agentcomms sees it; None for what no agent should get. `voice`
    makes a clip's :class:`VoiceNote` of its file, `attach` a photo's or document's
    :class:`Attachment` (each fetched only for a sender let in)."""
    user = event.get("user")
    channel = event.get("channel")
    ts = event.get("ts")
    if (
        event.get("type") != "message"
        or event.get("subtype") not in TAKEN_SUBTYPES
        or event.get("bot_id")
        or not isinstance(user, str)
        or user == own_user
        or not isinstance(channel, str)
        or not isinstance(ts, str)
    ):
        return None
    text = plain(str(event.get("text") or ""))
    unreadable = None
    files = [f for f in event.get("files") or [] if isinstance(f, dict)]
    clip = next((f for f in files if str(f.get("mimetype", "")).startswith(AUDIO)), None)
    note = voice(clip) if clip is not None and voice is not None and not text.strip() else None
    # A message's first file that is not a clip goes to the agent (send one at a time).
    document = next((f for f in files if f is not clip), None) if note is None else None
    attachment = attach(document) if document is not None and attach is not None else None
    unread = [f for f in files if f is not document] if attachment is not None else files
    if note is None and unread:  # a file's words come through, and the agent is told of it
        kind = "other files" if attachment is not None else "file"
        if text.strip() or attachment is not None:
            text = with_unread(kind, text).rstrip()
        else:
            unreadable = kind
    elif note is None and attachment is None and not text.strip():
        return None
    thread = event.get("thread_ts")
    thread = thread if isinstance(thread, str) and thread != ts else None
    profile = event.get("user_profile") or {}
    name = profile.get("display_name") or profile.get("real_name") or profile.get("name")
    return InboundMessage(
        provider=NAME,
        chat_id=channel,
        message_id=message_ref(ts, thread),
        sender_id=user,
        sender_name=str(name or user),
        text=text,
        chat_type=str(event.get("channel_type") or "channel"),
        reply_to=thread,
        voice=note,
        attachment=attachment,
        unreadable=unreadable,
    )


def press(
    payload: dict[str, Any], *, own_user: str | None, own_bot: str | None
) -> ButtonPress | None:
    """A ``block_actions`` payload: a press on a button under one of the app's own messages;
    None for anything else (another app's message, a modal, a select menu)."""
    message = payload.get("message") or {}
    channel = (payload.get("channel") or {}).get("id")
    user = payload.get("user") or {}
    pressed = [a for a in payload.get("actions") or [] if a.get("type") == "button"]
    ours = (own_user is not None and message.get("user") == own_user) or (
        own_bot is not None and message.get("bot_id") == own_bot
    )
    if (
        payload.get("type") != "block_actions"
        or not ours
        or len(pressed) != 1
        or not isinstance(pressed[0].get("value"), str)
        or not isinstance(channel, str)
        or not isinstance(user.get("id"), str)
        or not isinstance(message.get("ts"), str)
    ):
        return None
    keyboard = tuple(
        (str((e.get("text") or {}).get("text", "")), e["value"])
        for block in message.get("blocks") or []
        if block.get("type") == "actions"
        for e in block.get("elements") or []
        if isinstance(e.get("value"), str)
    )
    return ButtonPress(
        provider=NAME,
        chat_id=channel,
        sender_id=user["id"],
        sender_name=user.get("name") or user.get("username"),
        data=pressed[0]["value"],
        message_id=message["ts"],
        keyboard=keyboard,
    )


@dataclass(frozen=True)
class Refused:
    """Why a request to a Slack URL was refused, before its body was read."""

    reason: str


class SignedRequests:
    """Slack's signature on each request (``X-Slack-Signature``: ``v0=`` HMAC-SHA256 of
    ``v0:<timestamp>:<body>`` under the app's signing secret), its timestamp within five
    minutes, and each signature taken once."""

    def __init__(self, secret: str, *, now: Any = time.time) -> None:
        self._secret = secret.encode()
        self._now = now
        self._seen: OrderedDict[str, float] = OrderedDict()

    def before_body(self, timestamp: str | None, signature: str | None) -> Refused | None:
        """What the headers alone refuse: no signature, no timestamp, or one too old (so a
        stranger's body is never even read)."""
        if not signature or not signature.startswith("v0="):
            return Refused("no X-Slack-Signature (v0=…): not Slack's")
        if not timestamp or not timestamp.isdigit():
            return Refused("X-Slack-Signature without its X-Slack-Request-Timestamp: not Slack's")
        if abs(self._now() - int(timestamp)) > MAX_AGE_S:
            return Refused(
                "X-Slack-Signature is for a request more than five minutes old "
                "(X-Slack-Request-Timestamp): a replay, or this machine's clock is wrong"
            )
        return None

    def check(self, timestamp: str | None, signature: str | None, body: bytes) -> Refused | None:
        if (early := self.before_body(timestamp, signature)) is not None:
            return early
        assert timestamp is not None and signature is not None
        now = self._now()
        base = b"v0:" + timestamp.encode() + b":" + body
        expected = "v0=" + hmac.new(self._secret, base, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            return Refused("X-Slack-Signature does not match this body under the signing secret")
        # Forget what its timestamp refuses anyway (a timestamp is taken up to five minutes
        # either side of this clock, so a signature is kept for ten).
        while self._seen and now - next(iter(self._seen.values())) > 2 * MAX_AGE_S:
            self._seen.popitem(last=False)
        if signature in self._seen:
            return Refused("X-Slack-Signature was taken already: a replay")
        self._seen[signature] = now
        while len(self._seen) > REMEMBERED_SIGNATURES:
            self._seen.popitem(last=False)
        return None

    def forget(self, signature: str) -> None:
        """A request taken but not kept: Slack sending it again is no replay."""
        self._seen.pop(signature, None)
