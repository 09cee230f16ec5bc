"""Email against real servers (Dovecot for IMAP, Exim for SMTP, started for this module): an
agent's message sent over each kind of TLS, a human's reply read back and routed to the agent
that wrote, a spoofed sender refused and never answered, each message handled once across
restarts, and polling where the server has no IDLE."""

from __future__ import annotations

import asyncio
import imaplib
import re
import smtplib
import ssl
import uuid
from collections.abc import Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, ConsoleConfig
from agentcomms.errors import (
    AttachmentRefused,
    ChatProviderUnavailable,
    SendRefused,
    VoiceNoteRefused,
)
from agentcomms.ids import provider_event_id
from agentcomms.models import utcnow
from agentcomms.store import Store
from agentcomms.store.mail_cursors import MailCursor
from agentcomms.transports import InboundMessage, InboundResult
from agentcomms.transports._email_in import EmailReceiver
from agentcomms.transports.email import EmailSender
from gateway.chat.attachments import FOLDER
from tests.fakes.serve import free_port
from tests.support.chat import connected
from tests.support.hooks import open_approval
from tests.support.mailservers import (
    AUTHSERV_ID,
    PASSWORD,
    MailServers,
    binaries_missing,
    mail_servers,
)
from tests.support.sinks import TakesNoPresses
from tests.support.stack import register_recorder, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

pytestmark = pytest.mark.skipif(binaries_missing() is not None, reason=str(binaries_missing()))

AGENTS = MailServers.address("agents")
HUMAN = MailServers.address("human")
STRANGER = MailServers.address("stranger")
CONSOLE = "https://console.example.test"
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"


@pytest.fixture(scope="module")
def servers() -> Iterator[MailServers]:
    with mail_servers() as started:
        yield started


def email_config(servers: MailServers, **changes: Any) -> Config:
    imap = {
        "host": "127.0.0.1",
        "port": servers.imaps_port,
        "password": PASSWORD,
        "tls": "implicit",
        "cafile": str(servers.pki.ca),
    }
    smtp = {
        "host": "127.0.0.1",
        "port": servers.smtp_port,
        "password": PASSWORD,
        "tls": "starttls",
        "cafile": str(servers.pki.ca),
    }
    section: dict[str, Any] = {
        "enabled": True,
        "address": AGENTS,
        "imap": imap | changes.pop("imap", {}),
        "smtp": smtp | changes.pop("smtp", {}),
        "trusted_authserv_id": AUTHSERV_ID,
        "poll_s": 0.5,
        **changes,
    }
    return Config.model_validate({"chat": {"email": section}})


# The human's own mail client gives up on a server that stops answering, as a test must: a
# blocked read would hold the worker past its timeout, and nothing would say where.
CLIENT_TIMEOUT_S = 30


def inbox_of(servers: MailServers, account: str) -> list[EmailMessage]:
    """Every message in the account's inbox, read with the standard library's IMAP client."""
    client = imaplib.IMAP4("127.0.0.1", servers.imap_port, timeout=CLIENT_TIMEOUT_S)
    try:
        client.login(MailServers.address(account), PASSWORD)
        client.select("INBOX")
        _, found = client.search(None, "ALL")
        messages = []
        for number in found[0].split():
            _, data = client.fetch(number, "(BODY.PEEK[])")
            raw = data[0]
            assert isinstance(raw, tuple)
            parsed = message_from_bytes(raw[1], policy=policy.default)
            assert isinstance(parsed, EmailMessage)
            messages.append(parsed)
        return messages
    finally:
        client.logout()


def text_of(message: EmailMessage) -> str:
    """A message's words, with files attached to it or not."""
    body = message.get_body(preferencelist=("plain",))
    return body.get_content() if body is not None else ""


def human_sends(
    servers: MailServers, message: EmailMessage, *, login: str | None = "human"
) -> None:
    """A human's mail client: submits over STARTTLS with a login, or (login None) as anyone on
    the internet would deliver to the agents' server, with no login at all."""
    with smtplib.SMTP("127.0.0.1", servers.smtp_port, timeout=CLIENT_TIMEOUT_S) as client:
        client.starttls(context=ssl.create_default_context(cafile=str(servers.pki.ca)))
        if login is not None:
            client.login(MailServers.address(login), PASSWORD)
        client.send_message(message)


def written(sender: str, to: str, text: str, **headers: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    if "Message-ID" not in message:  # as a mail client writes it, so answers can thread to it
        message["Message-ID"] = make_msgid(domain="client.example.test")
    message.set_content(text)
    return message


@pytest.mark.parametrize("tls", ["starttls", "implicit", "none"])
async def test_an_agents_message_is_sent_from_its_own_address_over_each_kind_of_tls(
    servers: MailServers, tls: str
) -> None:
    port = servers.smtps_port if tls == "implicit" else servers.smtp_port
    cfg = email_config(servers, smtp={"tls": tls, "port": port})
    sent = await EmailSender(cfg).for_agent("backend").send_text(HUMAN, f"built ({tls})\nall green")
    got = await eventually(
        lambda: [m for m in inbox_of(servers, "human") if m["Message-ID"] == sent]
    )
    assert got[0]["From"].addresses[0].addr_spec == "agents+backend@example.test"
    assert got[0]["Subject"] == f"built ({tls})"
    assert got[0].get_content().replace("\r\n", "\n") == f"built ({tls})\nall green\n"


async def test_an_agents_files_are_attached_to_the_message_that_carries_its_words(
    servers: MailServers,
) -> None:
    files = [("report.txt", b"all green\n"), ("shot.png", b"\x89PNG\r\n\x1a\n\0\xff")]
    sender = EmailSender(email_config(servers)).for_agent("backend")
    sent = await sender.send_attached(HUMAN, "see attached", files)
    [got] = await eventually(
        lambda: [m for m in inbox_of(servers, "human") if m["Message-ID"] == sent]
    )
    assert text_of(got).strip() == "see attached"
    attached = [
        (a.get_filename(), a.get_content_type(), a.get_payload(decode=True))
        for a in got.iter_attachments()
    ]
    assert attached == [
        ("report.txt", "text/plain", b"all green\n"),
        ("shot.png", "image/png", b"\x89PNG\r\n\x1a\n\0\xff"),
    ]


async def test_a_server_whose_certificate_is_not_trusted_or_a_wrong_password_is_refused_saying_what_to_set(
    servers: MailServers,
) -> None:
    no_ca = email_config(servers, smtp={"cafile": None})
    with pytest.raises(SendRefused, match=r"chat\.email\.smtp\.cafile"):
        await EmailSender(no_ca).send_text(HUMAN, "hello")
    wrong = email_config(servers, smtp={"password": "not-it"})
    with pytest.raises(SendRefused, match=r"chat\.email\.smtp\.password") as refused:
        await EmailSender(wrong).send_text(HUMAN, "hello")
    assert "not-it" not in str(refused.value)
    with pytest.raises(SendRefused, match="not an email address"):
        await EmailSender(email_config(servers)).send_text("ann@x.org\r\nBcc: eve@evil.test", "hi")
    down = email_config(servers, smtp={"port": free_port()})
    with pytest.raises(ChatProviderUnavailable):
        await EmailSender(down).send_text(HUMAN, "hello")


class Recorded(TakesNoPresses):
    """The gateway's inbox as a receiver sees it: keeps what it is given, answers when asked,
    and keeps the mailbox's cursor in a real projection."""

    def __init__(self, store: Store, answers: dict[str, str] | None = None) -> None:
        self.mail_cursors = store
        self.messages: list[InboundMessage] = []
        self.clips: list[bytes | str] = []
        self.files: list[bytes | str] = []
        self.max_clip_bytes = 2_000_000
        self._answers = answers or {}

    async def accept(self, message: InboundMessage) -> InboundResult:
        self.messages.append(message)
        if message.voice is not None:  # fetched here, as the gateway fetches an allowed one's
            try:
                self.clips.append(await message.voice.fetch(self.max_clip_bytes))
            except VoiceNoteRefused as exc:
                self.clips.append(str(exc))
        if message.attachment is not None:  # as the gateway fetches an allowed one's
            try:
                self.files.append(await message.attachment.fetch(self.max_clip_bytes))
            except AttachmentRefused as exc:
                self.files.append(str(exc))
        return InboundResult(
            "queued", agent_id=message.agent_id, reply=self._answers.get(message.text)
        )


async def receiving(cfg: Config, sink: Recorded) -> EmailReceiver:
    receiver = EmailReceiver(cfg, sink)
    await receiver.start()
    await eventually(lambda: receiver.status.state == "connected")
    return receiver


async def test_replies_reach_the_agent_that_wrote_spoofed_senders_are_refused_and_nothing_is_handled_twice(
    servers: MailServers, sqlite_store: Store
) -> None:
    cfg = email_config(servers)
    sink = Recorded(sqlite_store, answers={"ping": "pong"})
    receiver = await receiving(cfg, sink)
    assert receiver.idle is True
    try:
        asked = await EmailSender(cfg).for_agent("backend").send_text(HUMAN, "Deploy now?")
        reply = written(
            HUMAN,
            "agents+backend@example.test",
            "Yes, go ahead.\n\nOn Mon, 7 Dec 2026, backend wrote:\n> Deploy now?\n-- \nAnn",
            Subject="Re: Deploy now?",
            In_Reply_To=asked,
        )
        await asyncio.to_thread(human_sends, servers, reply)
        # A new thread, to another agent by its plus-address, in HTML only.
        fresh = written(HUMAN, "agents+web@example.test", "", Subject="Check the CSS")
        fresh.set_content("<p>The <b>header</b> wraps.</p>", subtype="html")
        await asyncio.to_thread(human_sends, servers, fresh)
        # Anyone can write "From: human": without the server's pass it is a stranger's.
        spoofed = written(HUMAN, AGENTS, "ping", Subject="ping")
        await asyncio.to_thread(human_sends, servers, spoofed, login=None)
        # Another account that logged in, claiming to be the human: not their address.
        await asyncio.to_thread(
            human_sends, servers, written(HUMAN, AGENTS, "hi"), login="stranger"
        )
        # The human's own ping is answered, in its thread, by the server's word.
        await asyncio.to_thread(
            human_sends, servers, written(HUMAN, AGENTS, "ping", Subject="Re: x")
        )
        await eventually(lambda: len(sink.messages) == 5, timeout=30)
        answers = await eventually(
            lambda: [m for m in inbox_of(servers, "human") if m["In-Reply-To"] is not None],
            interval=0.3,
        )
    finally:
        await receiver.close()

    first, html, spoof, claimed, ping = sink.messages
    assert (first.agent_id, first.text, first.sender_id) == ("backend", "Yes, go ahead.", HUMAN)
    assert first.chat_id == HUMAN and first.reply_to == asked
    assert (html.agent_id, html.text) == ("web", "Check the CSS\nThe header wraps.")
    assert spoof.sender_id == f"unverified:{HUMAN}" and spoof.chat_id == HUMAN
    assert claimed.sender_id == f"unverified:{HUMAN}"
    assert ping.sender_id == HUMAN
    # One answer: the human's ping's. The spoofed ping's would have gone to the real human.
    assert [(m["In-Reply-To"], text_of(m).strip()) for m in answers] == [(ping.message_id, "pong")]

    # A restart reads on from where it stopped: nothing is handled twice.
    again = Recorded(sqlite_store)
    receiver = await receiving(cfg, again)
    try:
        await asyncio.to_thread(human_sends, servers, written(HUMAN, AGENTS, "after the restart"))
        await eventually(lambda: len(again.messages) == 1, timeout=30)
        await asyncio.sleep(1)  # anything read twice would have come with it
    finally:
        await receiver.close()
    assert [m.text for m in again.messages] == ["after the restart"]


def delivered_unchecked(servers: MailServers, messages: list[EmailMessage]) -> None:
    """Put mail straight into the agents' inbox (IMAP APPEND), as a flood arrives at once."""
    client = imaplib.IMAP4("127.0.0.1", servers.imap_port, timeout=CLIENT_TIMEOUT_S)
    try:
        client.login(AGENTS, PASSWORD)
        for message in messages:
            client.append("INBOX", None, None, message.as_bytes())
    finally:
        client.logout()


async def test_a_voice_clip_or_the_first_file_is_fetched_whole_on_demand_and_others_are_named(
    servers: MailServers, sqlite_store: Store
) -> None:
    sink = Recorded(sqlite_store)
    sink.max_clip_bytes = 1_500_000
    receiver = await receiving(email_config(servers), sink)
    clip = bytes(range(256)) * 4_000  # past the first read's 1 MB once in base64
    too_long = bytes(2_000_000)
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3_000
    try:
        for audio, words in ((clip, "listen"), (too_long, "")):
            spoken = written(HUMAN, AGENTS, words, Subject="Re: x")
            spoken.add_attachment(audio, maintype="audio", subtype="ogg", filename="note.ogg")
            await asyncio.to_thread(human_sends, servers, spoken)
        photo = written(HUMAN, AGENTS, "see the screenshot", Subject="Re: x")
        photo.add_attachment(png, maintype="image", subtype="png", filename="a.png")
        await asyncio.to_thread(human_sends, servers, photo)
        two = written(HUMAN, AGENTS, "two", Subject="Re: x")
        two.add_attachment(PDF, maintype="application", subtype="pdf", filename="b.pdf")
        two.add_attachment(png[:100], maintype="image", subtype="png", filename="c.png")
        await asyncio.to_thread(human_sends, servers, two)
        only = written(HUMAN, AGENTS, "", Subject="Re: x")
        only.add_attachment(too_long, maintype="application", subtype="pdf", filename="b.pdf")
        await asyncio.to_thread(human_sends, servers, only)
        # A clip is heard; a file with it is named, not saved.
        both = written(HUMAN, AGENTS, "", Subject="Re: x")
        both.add_attachment(b"OggS", maintype="audio", subtype="ogg", filename="n.ogg")
        both.add_attachment(png, maintype="image", subtype="png", filename="a.png")
        await asyncio.to_thread(human_sends, servers, both)
        # A signature's logo, shown by the HTML through its Content-ID, is no file sent.
        signed = written(HUMAN, AGENTS, "", Subject="Re: x")
        signed.set_content('<p>looks good</p><img src="cid:logo@x">', subtype="html")
        signed.add_related(png[:100], maintype="image", subtype="png", cid="<logo@x>")
        await asyncio.to_thread(human_sends, servers, signed)
        await eventually(lambda: len(sink.messages) == 7, timeout=30)
    finally:
        await receiver.close()
    spoken_message, long_message, with_photo, with_two, big_pdf, clip_and_photo, logo = (
        sink.messages
    )
    assert (logo.text, logo.attachment, logo.unreadable) == ("looks good", None, None)
    assert spoken_message.voice is not None and spoken_message.voice.content_type == "audio/ogg"
    assert spoken_message.text == "listen"
    assert sink.clips[0] == clip
    assert long_message.voice is not None
    assert isinstance(sink.clips[1], str) and sink.clips[1].startswith("it is more than")
    assert with_photo.attachment is not None and with_photo.unreadable is None
    assert (with_photo.attachment.kind, with_photo.attachment.name) == ("photo", "a.png")
    assert with_photo.text == "see the screenshot"
    assert sink.files[0] == png  # whole, though past the first read
    # One file at a time: the first is taken, the others named rather than lost unseen.
    assert with_two.attachment is not None and with_two.attachment.name == "b.pdf"
    assert (with_two.text, sink.files[1]) == ("[other files not passed on] two", PDF)
    assert big_pdf.attachment is not None and big_pdf.unreadable is None
    assert isinstance(sink.files[2], str) and sink.files[2].startswith("it is more than")
    assert clip_and_photo.voice is not None and clip_and_photo.attachment is None
    assert clip_and_photo.text == "[image not passed on]"


async def test_a_mailbox_numbered_anew_is_read_again_from_its_start(
    servers: MailServers, sqlite_store: Store
) -> None:
    cfg = email_config(servers)
    await asyncio.to_thread(human_sends, servers, written(HUMAN, AGENTS, "already there"))
    key = EmailReceiver(cfg, Recorded(sqlite_store)).key
    await eventually(
        lambda: any(b"already there" in m.as_bytes() for m in inbox_of(servers, "agents"))
    )
    # The cursor of an earlier numbering, far past any UID of this one.
    await sqlite_store.keep_mail_cursor(key, MailCursor(uidvalidity=1, last_uid=10**6), utcnow())
    sink = Recorded(sqlite_store)
    receiver = await receiving(cfg, sink)
    try:
        await eventually(lambda: "already there" in [m.text for m in sink.messages], timeout=30)
    finally:
        await receiver.close()
    kept = await sqlite_store.mail_cursor(key)
    assert kept is not None and kept.uidvalidity != 1 and kept.last_uid < 10**6


async def test_a_flood_of_spoofed_mail_is_read_in_slices_and_none_of_it_is_answered(
    servers: MailServers, sqlite_store: Store
) -> None:
    sink = Recorded(sqlite_store, answers={"flood": "this answer would go to the human"})
    receiver = await receiving(email_config(servers), sink)
    answered_before = len(inbox_of(servers, "human"))
    flood = [written(HUMAN, AGENTS, "flood", Message_ID=f"<{n}@evil.test>") for n in range(210)]
    try:
        await asyncio.to_thread(delivered_unchecked, servers, flood)
        await eventually(lambda: len(sink.messages) == len(flood), timeout=60)
    finally:
        await receiver.close()
    assert {m.sender_id for m in sink.messages} == {f"unverified:{HUMAN}"}
    assert len({m.message_id for m in sink.messages}) == len(flood)  # each once
    assert len(inbox_of(servers, "human")) == answered_before


async def test_imap_upgraded_by_starttls_connects_and_waits_with_idle(
    servers: MailServers, sqlite_store: Store
) -> None:
    cfg = email_config(servers, imap={"port": servers.imap_port, "tls": "starttls"})
    receiver = await receiving(cfg, Recorded(sqlite_store))
    try:
        assert receiver.idle is True
    finally:
        await receiver.close()


async def test_a_server_without_idle_is_polled(servers: MailServers, sqlite_store: Store) -> None:
    cfg = email_config(
        servers, imap={"host": "127.0.0.2", "port": servers.imap_port, "tls": "none"}
    )
    sink = Recorded(sqlite_store)
    receiver = await receiving(cfg, sink)
    try:
        assert receiver.idle is False
        await asyncio.to_thread(human_sends, servers, written(HUMAN, AGENTS, "polled"))
        await eventually(lambda: [m.text for m in sink.messages] == ["polled"], timeout=30)
    finally:
        await receiver.close()


async def forwarded(port: int, to_port: int) -> asyncio.Server:
    """The IMAP server reachable at `port` from now on (it was unreachable there before)."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", to_port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return await asyncio.start_server(connect, "127.0.0.1", port)


async def test_an_unreachable_or_refusing_server_is_retried_and_shown_without_its_password(
    servers: MailServers, sqlite_store: Store
) -> None:
    port = free_port()
    down = EmailReceiver(email_config(servers, imap={"port": port}), Recorded(sqlite_store))
    refused = EmailReceiver(
        email_config(servers, imap={"password": "wrong-secret"}), Recorded(sqlite_store)
    )
    await down.start()
    await refused.start()
    try:
        await eventually(lambda: down.status.state == "reconnecting")
        assert "did not answer" in str(down.status.error)
        # Once the server can be reached, a later try connects.
        server = await forwarded(port, servers.imaps_port)
        try:
            await eventually(lambda: down.status.state == "connected", timeout=30)
        finally:
            await down.close()
            server.close()
        await eventually(lambda: refused.status.error)
        assert "chat.email.imap.password" in str(refused.status.error)
        assert "wrong-secret" not in str(refused.status.error)
    finally:
        await down.close()
        await refused.close()


async def test_the_whole_path_an_approval_answered_by_reply_a_message_typed_and_a_reply_mirrored(
    servers: MailServers, temporal_env: WorkflowEnvironment, tmp_path: Path, tmux: Tmux
) -> None:
    agent = f"backend-{uuid.uuid4().hex[:8]}"
    channel = f"email:{HUMAN}"

    def configure(cfg: Config) -> Config:
        email = email_config(servers).chat.email
        chat = cfg.chat.model_copy(
            update={
                "email": email,
                "channels": {channel: agent},
                "allowed_senders": {"email": [HUMAN]},
            }
        )
        # The console published at CONSOLE (a tunnel to its port): emails carry its links.
        console = ConsoleConfig(enabled=True, port=0, public_url=CONSOLE)
        return cfg.model_copy(update={"chat": chat, "console": console})

    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        await connected(stack, "email")
        work = tmp_path / "work"
        work.mkdir()
        out = await register_recorder(stack, tmux, tmp_path, agent, folder=work)
        approval = await open_approval(stack, agent, session=False)

        def request() -> EmailMessage | None:
            return next(
                (m for m in inbox_of(servers, "human") if f"YES {approval}" in text_of(m)),
                None,
            )

        asked = await eventually(request, interval=0.3)
        assert asked["From"].addresses[0].addr_spec == f"agents+{agent}@example.test"
        assert "touch done.txt" in asked.get_content()
        assert f"Or answer it in the console, once: {CONSOLE}/once/" in asked.get_content()
        quoted = "\n".join(f"> {line}" for line in asked.get_content().splitlines())
        answer = written(
            HUMAN,
            str(asked["From"]),
            f"YES {approval}\n\nOn Mon, 7 Dec 2026, {agent} wrote:\n{quoted}",
            Subject=f"Re: {asked['Subject']}",
            In_Reply_To=str(asked["Message-ID"]),
        )
        await asyncio.to_thread(human_sends, servers, answer)
        waited = await stack.call("approval_wait", id=approval, wait_s=30)
        assert (waited["behavior"], waited["decided_via"]) == ("allow", "email")
        # The answer is acknowledged in its own thread, saying who answered where.
        told = await eventually(
            lambda: [
                m
                for m in inbox_of(servers, "human")
                if m["In-Reply-To"] == answer["Message-ID"] and approval in text_of(m)
            ],
            interval=0.3,
        )
        assert "on email" in told[0].get_content()

        # Another approval answered by its one-time link, through the published console.
        second = await open_approval(stack, agent, command="make deploy", session=False)
        linked = await eventually(
            lambda: next(
                (m for m in inbox_of(servers, "human") if f"YES {second}" in text_of(m)), None
            ),
            interval=0.3,
        )
        url = re.search(rf"{CONSOLE}/once/\S+", text_of(linked))
        assert url is not None
        assert stack.gateway.console is not None
        local = stack.gateway.console.address.rstrip("/") + url[0].removeprefix(CONSOLE)
        async with httpx.AsyncClient() as browser:  # as the tunnel hands it on
            page = await browser.get(local)
            assert "make deploy" in page.text, page.text
            pressed = await browser.post(local, data={"answer": "a"})
            assert pressed.status_code == 200, pressed.text
            again = await browser.post(local, data={"answer": "a"})
            assert again.status_code == 409
        waited = await stack.call("approval_wait", id=second, wait_s=30)
        assert (waited["behavior"], waited["decided_via"]) == ("allow", "email")

        # Words in the same thread are typed into the agent, behind their header.
        words = written(
            HUMAN,
            str(asked["From"]),
            "now run the tests\n-- \nAnn",
            Subject=f"Re: {asked['Subject']}",
            In_Reply_To=str(asked["Message-ID"]),
        )
        await asyncio.to_thread(human_sends, servers, words)
        await eventually(lambda: b"now run the tests" in out.read_bytes(), timeout=30)
        assert b"Ann" not in out.read_bytes()

        # The agent's reply reaches the human from its own address, threaded to their message.
        await stack.call("reply", channel_id=channel, message="tests pass", agent_id=agent)

        def mirrored() -> EmailMessage | None:
            return next(
                (m for m in inbox_of(servers, "human") if m["Subject"] == "tests pass"), None
            )

        reply = await eventually(mirrored, interval=0.3)
        assert reply["From"].addresses[0].addr_spec == f"agents+{agent}@example.test"

        # A file attached in the thread is saved in the agent's folder and typed as its path;
        # the agent's answer carries a file of its folder attached.
        shot = written(
            HUMAN, str(asked["From"]), "the failing page", Subject=f"Re: {asked['Subject']}"
        )
        shot.add_attachment(PDF, maintype="application", subtype="pdf", filename="page.pdf")
        await asyncio.to_thread(human_sends, servers, shot)
        event_id = provider_event_id("email", HUMAN, str(shot["Message-ID"]))
        saved = work / FOLDER / f"{event_id}-page.pdf"
        await eventually(lambda: f"[document: {saved}]".encode() in out.read_bytes(), timeout=30)
        assert saved.read_bytes() == PDF
        (work / "fix.txt").write_text("fixed\n")
        await stack.call(
            "reply", channel_id=channel, message="fixed", agent_id=agent, files=["fix.txt"]
        )
        fixed = await eventually(
            lambda: next((m for m in inbox_of(servers, "human") if m["Subject"] == "fixed"), None),
            interval=0.3,
        )
        assert [
            (a.get_filename(), a.get_payload(decode=True)) for a in fixed.iter_attachments()
        ] == [("fix.txt", b"fixed\n")]
