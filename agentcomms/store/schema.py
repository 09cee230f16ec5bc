"""The projection's tables: events, agents, channels, calls.

This is the current shape; the database reaches it through the Alembic revisions in
``migrations/versions`` (a test checks that the two agree). Agents, channels and calls are not
foreign keys of events on purpose: a message for an agent nobody registered yet is still kept.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Dialect,
    Float,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

# SQLite needs exactly INTEGER for a rowid primary key; PostgreSQL gets 64 bits.
SeqType = BigInteger().with_variant(Integer(), "sqlite")
JsonType = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware.

    SQLite keeps no offset, so without this a value would come back naive (or in local time).
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JsonType}  # noqa: RUF012


class EventRow(Base):
    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("id", name="uq_events_id"),
        Index("ix_events_agent_seq", "agent_id", "seq"),
        Index("ix_events_channel_seq", "channel_id", "seq"),
        Index("ix_events_agent_direction_seq", "agent_id", "direction", "seq"),
        Index("ix_events_agent_status", "agent_id", "status"),
        # AUTOINCREMENT: a seq is never handed out twice, so read cursors never point at a reused one.
        {"sqlite_autoincrement": True},
    )

    # The only ordering column: ids derived from provider message ids are not time-ordered.
    seq: Mapped[int] = mapped_column(SeqType, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64))
    agent_id: Mapped[str] = mapped_column(String(255))
    channel_id: Mapped[str] = mapped_column(String(255))
    type: Mapped[str] = mapped_column(String(32))
    role: Mapped[str] = mapped_column(String(16))
    direction: Mapped[str] = mapped_column(String(8))
    source_agent_id: Mapped[str | None] = mapped_column(String(255))
    payload: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime]
    delivered_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    note: Mapped[str | None] = mapped_column(Text)
    tries: Mapped[list[dict[str, Any]] | None] = mapped_column(JsonType)
    # The deployment's tag: a waiting text read back from here is verified like any other.
    signature: Mapped[str | None] = mapped_column(String(64))


class AgentRow(Base):
    __tablename__ = "agents"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    type: Mapped[str] = mapped_column(String(32))
    target: Mapped[str | None] = mapped_column(String(255))
    tmux_socket: Mapped[str | None] = mapped_column(Text)
    host: Mapped[str | None] = mapped_column(String(255))
    interrupt_key: Mapped[str] = mapped_column(String(32))
    submit_delay_ms: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    pending: Mapped[int] = mapped_column(Integer, default=0)
    last_delivered_event_id: Mapped[str | None] = mapped_column(String(64))
    last_error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime]
    state: Mapped[str] = mapped_column(String(16), default="unknown", server_default="unknown")
    waiting_for: Mapped[str | None] = mapped_column(Text)
    state_since: Mapped[datetime | None]
    # Seq of the last message check_messages returned; a row, so it outlives every process.
    read_cursor: Mapped[int | None] = mapped_column(SeqType)
    registered_at: Mapped[datetime]
    # When the newest registration or unregister its mailbox obeyed was made: a mailbox started
    # afresh (its workflow terminated) reads it back, so an older one signalled again is a replay.
    pane_changed_at: Mapped[datetime | None]


class ChannelRow(Base):
    __tablename__ = "channels"

    channel_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    agent_id: Mapped[str | None] = mapped_column(String(255), index=True)
    provider: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime]


class CallRow(Base):
    """One phone call; the transcript itself lives elsewhere, this row holds its reference."""

    __tablename__ = "calls"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent_id: Mapped[str] = mapped_column(String(255), index=True)
    status: Mapped[str] = mapped_column(String(32))
    direction: Mapped[str] = mapped_column(String(8))
    phone_number: Mapped[str | None] = mapped_column(String(64))
    started_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
    duration_seconds: Mapped[float | None] = mapped_column(Float)
    transcript_ref: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)


class ChatSenderRow(Base):
    """A sender admitted to reach agents through a provider (by pairing); revocable."""

    __tablename__ = "chat_senders"

    provider: Mapped[str] = mapped_column(String(32), primary_key=True)
    sender_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    sender_name: Mapped[str | None] = mapped_column(Text)
    chat_id: Mapped[str | None] = mapped_column(String(255))
    admitted_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]


class PairingCodeRow(Base):
    """A code an unknown sender was given; `agentcomms pair CODE` admits them. One per sender."""

    __tablename__ = "pairing_codes"
    __table_args__ = (UniqueConstraint("provider", "sender_id", name="uq_pairing_codes_sender"),)

    code: Mapped[str] = mapped_column(String(16), primary_key=True)
    provider: Mapped[str] = mapped_column(String(32))
    sender_id: Mapped[str] = mapped_column(String(255))
    sender_name: Mapped[str | None] = mapped_column(Text)
    chat_id: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]


class SpentRow(Base):
    """A signed input that may act once (a call's input, an outbox item), and who used it: a
    copy started or signalled again elsewhere (another run, another outbox) is refused."""

    __tablename__ = "spent"

    kind: Mapped[str] = mapped_column(String(32), primary_key=True)
    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    by: Mapped[str] = mapped_column(String(255))
    at: Mapped[datetime]


class StrangerCountRow(Base):
    """How much the strangers of one hour cost so far (recorded rows, pairing answers), and
    each agent's spending of its budget (``budget:calls:AGENT``…), by key: kept here so a
    restarted gateway does not start them again."""

    __tablename__ = "stranger_counts"

    hour: Mapped[int] = mapped_column(Integer, primary_key=True)  # hours since the epoch
    key: Mapped[str] = mapped_column(String(320), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)


class ApprovalPostRow(Base):
    """An approval's request as posted to one chat: the message to edit (or the chat to tell)
    once it is decided, kept here so a restarted gateway still does."""

    __tablename__ = "approval_posts"
    __table_args__ = (Index("ix_approval_posts_posted_at", "posted_at"),)

    approval_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    provider: Mapped[str] = mapped_column(String(32), primary_key=True)
    chat_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    message_id: Mapped[str] = mapped_column(String(255))
    posted_at: Mapped[datetime]


class PhoneCallerRow(Base):
    """A call coming in, between two of its steps (each a webhook of its own, or a line typed at
    the local phone): who called, whether the PIN was right, the requests still to offer. Kept
    here so a gateway restarted mid-call carries the call on."""

    __tablename__ = "phone_callers"

    call: Mapped[str] = mapped_column(String(64), primary_key=True)  # the phone's call id
    number: Mapped[str] = mapped_column(String(64))
    admitted: Mapped[int] = mapped_column(Integer)  # 1 once the PIN was right
    pending: Mapped[list[str]] = mapped_column(JsonType)  # approval ids, in the order offered
    started_at: Mapped[datetime]
    turn: Mapped[int] = mapped_column(Integer)  # the prompt being answered, in the transcript
    # What that prompt waits for ("pin", "key", "message"): a recorded message may still come
    # after the call's end, so a call that ends awaiting one whose recording began (Twilio said
    # so at the beep) keeps its progress until it came.
    awaits: Mapped[str] = mapped_column(String(16), default="", server_default="")
    updated_at: Mapped[datetime]


class PhoneRecordingRow(Base):
    """A message left by a caller, by its recording: Twilio may not serve a recording yet when
    it posts the <Record>'s action, so the message waits here for the recording status callback;
    once posted (by either request) it is done, and the other request posts nothing."""

    __tablename__ = "phone_recordings"

    recording: Mapped[str] = mapped_column(String(64), primary_key=True)  # Twilio's RecordingSid
    call: Mapped[str] = mapped_column(String(64))
    number: Mapped[str] = mapped_column(String(64))  # who left it
    agent: Mapped[str] = mapped_column(String(255))  # whom it is for
    url: Mapped[str] = mapped_column(String(1000))  # Twilio's RecordingUrl
    turn: Mapped[int] = mapped_column(Integer)  # the prompt it answered, in the transcript
    # 0 waiting, 1 posted, 2 known lost (logged); 3 complete but not served when Twilio said
    # so: the gateway fetches it again, since updated_at
    done: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime]


class PhonePinRow(Base):
    """Wrong PINs keyed at the phone menu from one number, across its calls (each call gets one
    try, so a guesser simply calls again): past a few, the number is locked out for a while."""

    __tablename__ = "phone_pins"

    number: Mapped[str] = mapped_column(String(64), primary_key=True)  # the caller's number
    failures: Mapped[int] = mapped_column(Integer)  # since the right PIN or the last lockout
    locked_until: Mapped[datetime | None]
    updated_at: Mapped[datetime]


class MailCursorRow(Base):
    """How far the gateway has read one IMAP mailbox: a UID is unique only within its
    UIDVALIDITY, and a server that changes UIDVALIDITY has numbered the mailbox anew."""

    __tablename__ = "mail_cursors"

    mailbox: Mapped[str] = mapped_column(String(512), primary_key=True)  # user@host:port/INBOX
    uidvalidity: Mapped[int] = mapped_column(BigInteger)
    last_uid: Mapped[int] = mapped_column(BigInteger)  # every UID up to it was handled
    updated_at: Mapped[datetime]


metadata = Base.metadata
