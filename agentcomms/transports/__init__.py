"""The seam between agentcomms and the chat providers: one module per provider, one registry.

A provider module ``agentcomms/transports/<name>.py`` holds both sides of a provider:

- its receiving side, a :class:`Receiver` the gateway runs (long polling, a bot connection, or
  webhook routes on the gateway's HTTP server). It turns what the provider delivers into
  :class:`InboundMessage` and hands each one to an :class:`InboundSink`, acknowledging the
  provider only once the sink returns (the message is then durable, or refused with a reply);
- its sending side, a :class:`Sender` run inside a Temporal activity. It raises the
  :class:`SendError` subclasses below, which the activity turns into retry decisions.

and two module-level factories, ``receiver(cfg, sink)`` and ``sender(cfg)``. Provider SDKs are
imported by the provider module only, so importing this package stays cheap (the CLI and the MCP
server read :data:`PROVIDERS`).

Provider names are written once, in :data:`ProviderName`; the configuration has one
``chat.<name>`` section per provider.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, get_args

from pydantic import BaseModel, ConfigDict

from agentcomms.errors import NoTransport, VoiceNoteRefused

if TYPE_CHECKING:
    import httpx
    from starlette.routing import BaseRoute

    from agentcomms.config import Config

ProviderName = Literal[
    "local", "telegram", "discord", "whatsapp", "sms", "slack", "ntfy", "irc", "email"
]
PROVIDERS: tuple[str, ...] = get_args(ProviderName)

# A receipt tells the human their message was queued, then typed into the agent's pane.
ReceiptStage = Literal["queued", "typed"]

# What `status`, `channels` and MCP `list_channels` show for a provider.
LinkState = Literal["connected", "connecting", "reconnecting", "disabled", "failed"]


@dataclass(frozen=True)
class Abilities:
    """What a provider's chats can do, which decides how a request or a reply is shown there.

    Declared here, beside the names, so the gateway reads them without importing any SDK.
    """

    # How a human answers an approval there: by its buttons (the message edited once decided),
    # by a reply carrying its code (the outcome sent as a new message), by a notification's
    # actions (each posts a one-time token to the gateway's published URL), or not at all.
    answers: Literal["buttons", "codes", "push", "none"]
    # Each message is billed and a phone may show the parts out of order (SMS): an agent's
    # reply goes as its start and where the whole is, never as many pieces.
    billed: bool = False
    # A request too long for one message goes as a file attached to the last (the others split).
    attaches_long: bool = False
    # Messages are read as markdown: a request is shown escaped there.
    markdown: bool = False
    # Plain text with no length to speak of (an email): a request is shown whole, never cut,
    # and its outcome answers it in its own thread.
    whole_text: bool = False
    # Its messages pass through the provider's servers: what looks like a secret is hidden.
    remote: bool = True
    # An agent's message may carry files, sent as the provider's attachments (``send_file``
    # after the text, or ``send_attached`` with it).
    files: bool = False
    # Each approval is a thread of its own: the request's start and its buttons in the chat,
    # the rest of it and how it ended in the thread, apart from the chat's other messages.
    threads: bool = False


ABILITIES: dict[str, Abilities] = {
    "local": Abilities(answers="none", remote=False),
    "telegram": Abilities(answers="buttons", files=True),
    "discord": Abilities(answers="buttons", attaches_long=True, markdown=True, files=True),
    "whatsapp": Abilities(answers="codes"),
    "sms": Abilities(answers="codes", billed=True),
    # Block Kit buttons; a request's text goes in plain_text sections, never read as markup.
    # Files shared in the chat (uploaded with files_upload_v2), in the text's thread.
    "slack": Abilities(answers="buttons", files=True, threads=True),
    # A notification carries nothing back but its actions' posts (gateway/approvals/push.py),
    # and no files: ntfy's attachments are links anyone holding them can open.
    "ntfy": Abilities(answers="push"),
    # IRC has no files but DCC, a direct connection to the human's machine.
    "irc": Abilities(answers="codes"),
    # Files attached to the message itself (``send_attached``).
    "email": Abilities(answers="codes", whole_text=True, files=True),
}


def abilities(provider: str) -> Abilities:
    """What ``provider``'s chats can do; a name outside :data:`PROVIDERS` can do nothing, and
    what is shown there counts as leaving the machine."""
    return ABILITIES.get(provider, Abilities(answers="none"))


def is_provider(name: str) -> bool:
    return name in PROVIDERS


def channel_id(provider: str, chat_id: str | int) -> str:
    """``telegram:456``: the channel of a provider's chat."""
    return f"{provider}:{chat_id}"


@dataclass(frozen=True)
class VoiceNote:
    """Audio a human sent in place of text, not fetched yet.

    The gateway fetches it only for a sender it lets in, so a stranger's audio costs neither a
    download nor a transcription. ``fetch(max_bytes)`` returns the audio through the provider's
    API; it raises :class:`VoiceNoteRefused` when the provider will never give it (too large,
    gone) and anything else when it may later (the message is then not kept, and comes again).
    """

    fetch: Callable[[int], Awaitable[bytes]]
    content_type: str = "audio/ogg"
    duration_s: float | None = None  # as the provider tells it before any download
    size: int | None = None


@dataclass(frozen=True)
class Attachment:
    """A photo or document a human sent, not fetched yet.

    As for a voice note, the gateway fetches it only for a sender it lets in, so a stranger's
    file is never downloaded. ``fetch(max_bytes)`` raises :class:`AttachmentRefused` when the
    provider will never give it (too large, gone). ``name`` is the sender's file name, shown
    to the agent but never trusted: the saved file's type is read from its bytes.
    """

    fetch: Callable[[int], Awaitable[bytes]]
    kind: Literal["photo", "document"]
    name: str | None = None
    size: int | None = None  # as the provider tells it before any download


async def read_at_most(
    response: httpx.Response, max_bytes: int, refused: type[Exception] = VoiceNoteRefused
) -> bytes:
    """A streamed download's body, ``refused`` once it passes ``max_bytes`` (a provider's size
    field may be missing or wrong, so the bytes themselves are counted)."""
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) > max_bytes:
            raise refused(f"it is more than {max_bytes / 1e6:.0f} MB")
    return bytes(data)


def not_passed_on(kind: str) -> str:
    """The reply to a message with nothing an agent can read (a photo without words), from a
    sender the gateway lets in."""
    return (
        f"Only text and voice notes reach the agent: this {kind} was not passed on. "
        "Please send it as text."
    )


def with_unread(kind: str, text: str) -> str:
    """Words that came with something else (a photo's caption): the agent gets the words and is
    told that something came with them, rather than it being hidden."""
    return f"[{kind} not passed on] {text}"


class InboundMessage(BaseModel):
    """One message a human sent through a provider, as the receiving side understood it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    provider: str
    chat_id: str
    message_id: str
    sender_id: str
    sender_name: str
    text: str
    chat_type: str | None = None  # private, group, channel…
    reply_to: str | None = None  # the provider message id this one answers
    # A voice note: ``text`` is then its caption (often empty) until it is transcribed.
    voice: VoiceNote | None = None
    # A photo or document: ``text`` is then its caption (maybe empty); the gateway saves it in
    # the agent's folder and the agent reads its path.
    attachment: Attachment | None = None
    # A message of nothing an agent can read (a photo without words): what it was ("image").
    # The gateway checks its sender first, as for words: only a sender it lets in is told why.
    unreadable: str | None = None
    # The agent the provider's own threading names (an email answering that agent's message,
    # or sent to its plus-address): it goes there when that agent is known, before the chat's
    # mapping. The sender is checked all the same.
    agent_id: str | None = None

    @property
    def channel_id(self) -> str:
        return channel_id(self.provider, self.chat_id)


@dataclass(frozen=True)
class InboundResult:
    """What became of an inbound message; ``reply`` is a short answer for the sender, if any."""

    # answered: it carried an approval's code and was taken as the answer (never typed).
    outcome: Literal["queued", "duplicate", "rejected", "unrouted", "refused", "answered"]
    event_id: str | None = None
    agent_id: str | None = None
    reply: str | None = None


@dataclass(frozen=True)
class ButtonPress:
    """A person pressed a button under one of our messages (an approval's Allow / Deny)."""

    provider: str
    chat_id: str
    sender_id: str
    sender_name: str | None
    data: str  # what the button was sent with
    # The message the button is under, and its buttons, (label, data), as the provider sent
    # them back with the press: a question's ticks are read from them, so none are kept here.
    message_id: str | None = None
    keyboard: tuple[tuple[str, str], ...] = ()

    @property
    def channel_id(self) -> str:
        return f"{self.provider}:{self.chat_id}"


class InboundSink(Protocol):
    """Where a receiver hands each message and button press (the gateway's chat inbox).

    Every result is final: the receiver acknowledges the provider and sends ``reply`` when set.
    An exception means nothing was kept: the receiver must not acknowledge, so the provider
    delivers the message again (with the same message id, hence the same event id).
    """

    async def accept(self, message: InboundMessage) -> InboundResult: ...

    async def button(self, press: ButtonPress) -> str:
        """What the presser is told (a short toast): taken, already answered, or not theirs;
        :class:`ShownInButtons` when the press's whole effect is shown in the buttons."""
        ...

    def in_place(self, data: str) -> bool:
        """Whether a press on the button sent with `data` is meant only to change the buttons
        under its message (a box ticked or unticked), settling nothing: known before the
        press is decided, so a provider that must acknowledge at once knows how."""
        ...


class ShownInButtons(str):
    """What the presser of a box is told once the message's own buttons show their tick: the
    buttons say it already, so a provider that can take a press without a word (Discord) says
    nothing more, and one that always answers with a toast (Telegram) shows these words."""

    __slots__ = ()


@dataclass
class LinkStatus:
    """A receiver's connection, as a person reading `agentcomms status` needs to see it."""

    state: LinkState
    error: str | None = None
    since: datetime | None = None

    def as_json(self) -> dict[str, str]:
        out: dict[str, str] = {"status": self.state}
        if self.error:
            out["error"] = self.error
        if self.since:
            out["since"] = self.since.isoformat(timespec="seconds")
        return out


class Receiver(Protocol):
    """The receiving side of a provider, run by the gateway."""

    status: LinkStatus

    async def start(self) -> None:
        """Begin receiving (return promptly; long polls run in a task of their own)."""

    async def close(self) -> None: ...

    def routes(self) -> list[BaseRoute]:
        """The webhook routes this receiver serves on the gateway's HTTP server (maybe none)."""


class TextSender(Protocol):
    """What :func:`send_pieces` needs of a provider: one message at a time."""

    # The longest text the provider takes in one message; a longer one goes as pieces.
    max_chars: int

    async def send_text(self, chat_id: str, text: str, *, reply_to: str | None = None) -> str:
        """Send ``text`` (at most :attr:`max_chars`) as one message; the provider's id of it."""


class Sender(TextSender, Protocol):
    """The sending side of a provider, run in an activity; raises :class:`SendError`."""

    async def receipt(
        self, chat_id: str, message_id: str, stage: ReceiptStage, *, note: str | None = None
    ) -> None:
        """Tell the human what became of their message: a reaction where the provider has
        them, otherwise a short reply. ``note`` says what typing changed (the agent's
        ``max_chars`` cut the text); a reaction cannot say it, so it goes as a reply."""

    async def close(self) -> None: ...


class FileSender(Protocol):
    """What a provider whose :class:`Abilities` say ``files`` also does."""

    async def send_file(
        self, chat_id: str, name: str, data: bytes, *, reply_to: str | None = None
    ) -> str:
        """Send ``data`` as an attachment called ``name``; the provider's id of the message.
        ``reply_to`` is what the text before it answered: a provider with threads (Slack)
        puts the file in the thread the text went to."""


class AttachingSender(Protocol):
    """A provider whose message carries its files itself (an email): the text and its files
    go as one message, not the text and then one message a file."""

    async def send_attached(
        self,
        chat_id: str,
        text: str,
        files: list[tuple[str, bytes]],
        *,
        reply_to: str | None = None,
    ) -> str:
        """Send ``text`` with ``files`` (name, bytes) attached; the provider's id of it."""


def as_agent(sender: Sender, agent_id: str) -> Sender:
    """The sender of one agent's messages where a provider shows who wrote (email writes from
    the agent's own plus-address, so a reply finds it); the sender itself elsewhere."""
    for_agent = getattr(sender, "for_agent", None)
    return cast(Sender, for_agent(agent_id)) if callable(for_agent) else sender


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most ``limit`` characters, cut at a line break where there is one."""
    pieces: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        cut = cut + 1 if cut > limit // 2 else limit
        pieces.append(text[:cut])
        text = text[cut:]
    return [*pieces, text] if text or not pieces else pieces


def first_part(text: str, chars: int, the_rest: str) -> str:
    """``text`` when it fits in ``chars``; otherwise its first piece (cut as :func:`split_text`
    cuts) followed by ``the_rest``, which says where the whole text can be read. For a chat
    where every message is billed and parts may arrive out of order (SMS)."""
    if len(text) <= chars:
        return text
    return split_text(text, chars)[0].rstrip() + the_rest


async def send_pieces(
    sender: TextSender,
    chat_id: str,
    text: str,
    *,
    reply_to: str | None = None,
    already_sent: int = 0,
    last_id: str = "",
    on_sent: Callable[[int, str], None] | None = None,
) -> str:
    """Send ``text`` as pieces the provider takes, one message each, skipping the first
    ``already_sent`` (a retried send resumes where the failed one stopped: the human must not
    see a piece twice). ``on_sent(pieces sent, id)`` follows each piece. Only the first piece
    refers to ``reply_to``. Returns the provider's id of the last piece, which callers keep as
    the message's id (``last_id`` when every piece had gone already)."""
    for i, piece in enumerate(split_text(text, sender.max_chars)):
        if i < already_sent:
            continue
        last_id = await sender.send_text(chat_id, piece, reply_to=reply_to if i == 0 else None)
        if on_sent is not None:
            on_sent(i + 1, last_id)
    return last_id


def typed_with_note(note: str) -> str:
    """A short reply saying the message was typed, and what typing changed."""
    return f"Typed into the agent's terminal, but {note}."


@dataclass(frozen=True)
class ProviderModule:
    """A provider module's two factories."""

    name: str
    receiver: Callable[[Config, InboundSink], Receiver | None]
    sender: Callable[[Config], Sender]


def load(name: str) -> ProviderModule:
    """The provider module of ``name`` (imported on first use: it brings its SDK)."""
    if name not in PROVIDERS:
        raise ValueError(f"unknown provider {name!r}; known: {', '.join(PROVIDERS)}")
    try:
        module: Any = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise NoTransport(f"{name} has no transport in this version of agentcomms") from None
    return ProviderModule(name=name, receiver=module.receiver, sender=module.sender)
