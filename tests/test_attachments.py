"""Files both ways between a human and an agent. The rules at the lowest level: what a human
sends (type by the bytes, a safe name, the agent's own folder on the gateway's host, the size
cap, owner-only) and what an agent sends (only from its own folder once links are followed, a
regular file within the cap, sent only as it was checked). Then once end to end through
Telegram (the real python-telegram-bot against a local Bot API: getFile and the download in,
sendDocument out) with a real tmux pane working in its own folder and MCP's send_message, on a
real Temporal dev server and SQLite."""

from __future__ import annotations

import stat
import sys
from base64 import b64decode
from pathlib import Path
from typing import Any

import pytest
from fastmcp.exceptions import ToolError
from temporalio.testing import WorkflowEnvironment

from activities.chat import read_checked
from agentcomms.config import Config
from agentcomms.errors import AttachmentRefused, RpcError, SendRefused
from agentcomms.ids import provider_event_id
from agentcomms.transports import Attachment
from gateway.chat.attachments import (
    FOLDER,
    Attachments,
    Whereabouts,
    folder_on_this_host,
    saved_name,
    sniff,
)
from gateway.messages.files import checked_file, files_for_reply
from mcp_server import build_server
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.support import acp_agent
from tests.support.acp_agent import log_of
from tests.support.chat import CHAT, connected, with_discord, with_telegram
from tests.support.mcp import call
from tests.support.stack import Stack, register, running_stack, status_is
from tests.support.tmux import Tmux, pane_command
from tests.support.waiting import eventually

SCRIPTED = [sys.executable, acp_agent.__file__]
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32
JPEG = b"\xff\xd8\xff\xe0" + b"\0" * 32
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"
ELF = b"\x7fELF\x02\x01\x01" + b"\0" * 32


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (PNG, ("image/png", ".png")),
        (JPEG, ("image/jpeg", ".jpg")),
        (b"GIF89a" + b"\0" * 8, ("image/gif", ".gif")),
        (b"RIFF\x10\0\0\0WEBPVP8 ", ("image/webp", ".webp")),
        (PDF, ("application/pdf", ".pdf")),
        (b"line one\r\n\tline two\n", ("text/plain", ".txt")),
        ("naïve café ✓\n".encode(), ("text/plain", ".txt")),
        (ELF, None),  # an executable, whatever it is called
        (b"PK\x03\x04" + b"\0" * 26, None),  # an archive
        (b"text with a \0 NUL", None),
        (b"\xff\xfe not UTF-8", None),
        (b"#!/bin/sh\n\x1b[31m escape", None),  # a terminal escape in "text"
        (b"", None),
    ],
)
def test_a_files_type_is_read_from_its_bytes_and_only_images_pdf_and_text_pass(
    data: bytes, expected: tuple[str, str] | None
) -> None:
    assert sniff(data) == expected


@pytest.mark.parametrize(
    ("name", "extension", "expected"),
    [
        ("screenshot.png", ".png", "EVT-screenshot.png"),
        ("../../etc/passwd", ".txt", "EVT-passwd.txt"),
        (".bashrc", ".txt", "EVT-bashrc.txt"),
        ("report.exe", ".pdf", "EVT-report.pdf"),  # the bytes decide the extension
        ("a b;rm -rf $(x).txt", ".txt", "EVT-a_b_rm_-rf_x.txt"),
        (None, ".jpg", "EVT.jpg"),
        ("...", ".txt", "EVT.txt"),
        ("x" * 200 + ".txt", ".txt", "EVT-" + "x" * 60 + ".txt"),
    ],
)
def test_a_saved_name_is_the_event_and_the_safe_part_of_the_senders_name(
    name: str | None, extension: str, expected: str
) -> None:
    assert saved_name("EVT", name, extension) == expected


def _where(**fields: Any) -> Whereabouts:
    return Whereabouts(**{"type": "tmux", "target": "main:0.0", "host": "here", **fields})


def test_only_an_agent_on_the_gateways_host_gets_files_in_its_own_folder() -> None:
    process = _where(type="process", target="claude-acp", cwd="/srv/app")
    assert folder_on_this_host(process, "here", "backend") == "/srv/app"
    assert folder_on_this_host(_where(), "here", "backend") == ""  # its pane says
    with pytest.raises(AttachmentRefused, match=r"gateway's machine \(here\).*runs on there"):
        folder_on_this_host(_where(host="there"), "here", "backend")
    with pytest.raises(AttachmentRefused, match="backend is not running"):
        folder_on_this_host(None, "here", "backend")


class Fetches:
    """What a provider would hand over, counting the downloads."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.asked: list[int] = []

    async def __call__(self, max_bytes: int) -> bytes:
        self.asked.append(max_bytes)
        return self.data


async def test_a_file_is_saved_owner_only_in_the_agents_folder_and_the_cap_and_type_hold(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    where = _where(type="process", cwd=str(work))
    files = Attachments("here", 100)

    good = Fetches(PNG)
    saved = await files.save(
        "EVT1", Attachment(good, "photo", "shot.jpg", len(PNG)), "backend", where
    )
    assert saved.path == work / FOLDER / "EVT1-shot.png"
    assert saved.path.read_bytes() == PNG and saved.content_type == "image/png"
    assert stat.S_IMODE(saved.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(saved.path.parent.stat().st_mode) == 0o700
    assert good.asked == [100]

    told_large = Fetches(PNG)
    with pytest.raises(AttachmentRefused, match=r"chat.max_file_bytes"):
        await files.save("EVT2", Attachment(told_large, "photo", None, 101), "b", where)
    assert told_large.asked == []  # what the provider said is too large is never fetched
    with pytest.raises(AttachmentRefused, match=r"more than the 0.0 MB"):
        await files.save("EVT3", Attachment(Fetches(PNG * 4), "photo", None, None), "b", where)
    with pytest.raises(AttachmentRefused, match="not a type an agent is given"):
        await files.save(
            "EVT4", Attachment(Fetches(ELF), "document", "notes.txt", None), "b", where
        )
    assert sorted(p.name for p in (work / FOLDER).iterdir()) == ["EVT1-shot.png"]

    # An agent working in the home folder: its .agentcomms is agentcomms' own.
    in_home = Attachments("here", 100, home=work / ".agentcomms")
    with pytest.raises(AttachmentRefused, match="Start it in a project folder"):
        await in_home.save("EVT5", Attachment(Fetches(PNG), "photo", None, None), "b", where)


async def test_a_telegram_photo_from_alice_is_saved_in_her_agents_folder_and_typed_as_its_path(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    agent: str,
    tmux: Tmux,
) -> None:
    stranger = 999
    channels = {f"telegram:{CHAT}": agent, f"telegram:{stranger}": agent}
    work, out = pane_in_a_folder(tmux, tmp_path)
    async with running_stack(
        temporal_env.client, tmp_path, configure=with_telegram(telegram, agent, channels=channels)
    ) as stack:
        await register_pane(stack, agent, tmux)
        await connected(stack, "telegram")

        # A stranger's file is never fetched, not even asked about.
        mallory = telegram.human_sends_file(stranger, b"malware?", file_name="run.sh")
        await eventually(lambda: telegram.texts_to(stranger))
        assert "getFile" not in telegram.calls and telegram.downloads == []
        rejected = await stack.store.get_event(
            provider_event_id("telegram", stranger, mallory["message"]["message_id"])
        )
        assert rejected is not None and rejected.status == "rejected"
        assert rejected.payload["attachment"] == {"kind": "document", "name": "run.sh"}

        update = telegram.human_sends_file(CHAT, JPEG, kind="photo", caption="the bug, see?")
        saved = work / FOLDER / f"{update_event(update)}.jpg"
        await eventually(lambda: saved.is_file(), timeout=20)
        assert saved.read_bytes() == JPEG
        assert telegram.downloads == [f"photos/file_{file_id_of(update)}.jpg"]  # the large one
        await eventually(
            lambda: (
                out.read_bytes()
                == f"[telegram:{CHAT} from Alice] [photo: {saved}]\n| the bug, see?\r".encode()
            ),
            timeout=20,
        )

        # A type no agent is given is answered, and nothing is typed.
        telegram.human_sends_file(CHAT, ELF, file_name="notes.txt")
        await eventually(lambda: len(telegram.texts_to(CHAT)) == 1, timeout=20)
        [reply] = telegram.texts_to(CHAT)
        assert reply.startswith("Your document was not passed on: it is not a type")
        assert sorted(p.name for p in (work / FOLDER).iterdir()) == [saved.name]

        # The agent answers with files of its folder, as Telegram documents after the text.
        (work / "report.txt").write_text("all green\n")
        mcp = build_server(stack.cfg.server.socket(), default_agent=agent)
        sent = await call(
            mcp,
            "send_message",
            provider="telegram",
            chat_id=str(CHAT),
            message="Fixed: see the report",
            files=["report.txt", str(saved)],
        )
        assert sent["success"] is True, sent
        assert telegram.texts_to(CHAT)[-1] == "Fixed: see the report"
        assert telegram.documents_to(CHAT) == [
            ("report.txt", b"all green\n"),
            (saved.name, JPEG),
        ]
        (tmp_path / "secret").write_text("key")
        with pytest.raises(ToolError, match="only files in your own folder"):
            await call(
                mcp,
                "send_message",
                provider="telegram",
                chat_id=str(CHAT),
                message="take this",
                files=["../secret"],
            )
        assert telegram.texts_to(CHAT)[-1] == "Fixed: see the report"  # nothing was sent


@pytest.mark.parametrize("provider", ["irc", "ntfy", "whatsapp", "sms"])
async def test_files_to_a_provider_that_carries_none_are_refused_naming_those_that_do(
    provider: str,
) -> None:
    # Refused before anything is looked up: no projection, no mailbox needed.
    with pytest.raises(RpcError, match=f"{provider} carries no files, so nothing was sent") as no:
        await files_for_reply(Config(), None, None, "host", "backend", provider, ["a.txt"])  # type: ignore[arg-type]
    assert "telegram, discord, slack" in str(no.value)


def _folder(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "build.log").write_text("ok\n")
    (tmp_path / "secret").write_text("key")
    (work / "leak").symlink_to(tmp_path / "secret")
    (work / "latest.log").symlink_to(work / "logs" / "build.log")
    (work / "big.bin").write_bytes(b"x" * 101)
    return work


@pytest.mark.parametrize(
    ("path", "sent_as"),
    [
        ("logs/build.log", "build.log"),
        ("{work}/logs/build.log", "build.log"),
        ("latest.log", "build.log"),  # a link inside the folder, to a file inside it
        ("logs/../logs/build.log", "build.log"),
        (".agentcomms/attachments/evt_1-shot.png", "evt_1-shot.png"),  # what a human sent
    ],
)
def test_an_agent_sends_files_of_its_own_folder(tmp_path: Path, path: str, sent_as: str) -> None:
    work = _folder(tmp_path)
    (work / FOLDER).mkdir(parents=True)
    (work / FOLDER / "evt_1-shot.png").write_text("ok\n")
    ref = checked_file(path.format(work=work), str(work), 100, home=tmp_path / "home")
    assert (ref.name, ref.size) == (sent_as, 3)
    assert Path(ref.path).parent in (work / "logs", work / FOLDER)


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ("../secret", "only files in your own folder"),
        ("{tmp}/secret", "only files in your own folder"),
        ("leak", "only files in your own folder"),  # a link pointing out
        ("/etc/passwd", "only files in your own folder"),
        ("logs", "not a file"),
        ("missing.txt", "no such file"),
        ("big.bin", "more than the 0.0 MB"),
        (".ssh/id_rsa", "hidden files and folders"),
        (".env", "hidden files and folders"),
        ("{tmp}/work/.agentcomms/key", "agentcomms' own folder"),
    ],
)
def test_an_agent_may_not_send_what_is_not_a_file_of_its_own_folder_within_the_cap(
    tmp_path: Path, path: str, refused: str
) -> None:
    work = _folder(tmp_path)
    (work / ".ssh").mkdir()
    (work / ".ssh" / "id_rsa").write_text("k")
    (work / ".env").write_text("k")
    (work / ".agentcomms").mkdir()
    (work / ".agentcomms" / "key").write_text("k")  # the agent works in the home folder
    with pytest.raises(AttachmentRefused, match=refused):
        checked_file(path.format(tmp=tmp_path), str(work), 100, home=work / ".agentcomms")


def test_a_file_changed_or_swapped_for_a_link_after_it_was_checked_is_not_sent(
    tmp_path: Path,
) -> None:
    work = _folder(tmp_path)
    log = work / "logs" / "build.log"
    ref = checked_file("logs/build.log", str(work), 100)
    assert read_checked(ref) == b"ok\n"
    log.write_text("changed\n")
    with pytest.raises(SendRefused, match="changed after it was sent"):
        read_checked(ref)
    log.unlink()
    log.symlink_to(tmp_path / "secret")
    with pytest.raises(SendRefused, match="is gone since"):
        read_checked(ref)


def pane_in_a_folder(tmux: Tmux, tmp_path: Path) -> tuple[Path, Path]:
    """A recorder pane working in its own folder, as an agent's pane works in its project: the
    folder, and the file the pane's bytes land in."""
    work = tmp_path / "work"
    work.mkdir()
    out = tmp_path / "pane.bytes"
    out.touch()
    tmux.run(
        "new-session", "-d", "-s", "rec", "-c", str(work), f"stty raw -echo; exec cat >> {out}"
    )
    return work, out


async def register_pane(stack: Stack, agent: str, tmux: Tmux) -> None:
    await eventually(lambda: pane_command(tmux, "rec:0.0") == "cat", timeout=5)
    await register(stack, agent, tmux, "rec:0.0", submit_delay_ms=0)
    # A file for an agent the projection does not show registered yet is refused (no folder).
    await eventually(lambda: status_is(stack, agent, "online"))


async def test_a_discord_file_from_alice_is_saved_and_typed_and_the_agent_attaches_one_back(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    discord: FakeDiscord,
    agent: str,
    tmux: Tmux,
) -> None:
    work, out = pane_in_a_folder(tmux, tmp_path)
    async with running_stack(
        temporal_env.client, tmp_path, configure=with_discord(discord, agent)
    ) as stack:
        await register_pane(stack, agent, tmux)
        await connected(stack, "discord")

        message = discord.human_sends_file(
            discord.general, "spec.pdf", PDF, text="read this", content_type="application/pdf"
        )
        event_id = provider_event_id("discord", discord.general, message["id"])
        saved = work / FOLDER / f"{event_id}-spec.pdf"
        await eventually(
            lambda: (
                out.read_bytes()
                == f"[discord:{discord.general} from Alice] [document: {saved}]\n| read this\r".encode()
            ),
            timeout=20,
        )
        assert saved.read_bytes() == PDF and discord.downloads == ["spec.pdf"]

        (work / "summary.md").write_text("# Summary\n")
        mcp = build_server(stack.cfg.server.socket(), default_agent=agent)
        sent = await call(
            mcp,
            "send_message",
            provider="discord",
            chat_id=str(discord.general),
            message="My summary",
            files=["summary.md"],
        )
        assert sent["success"] is True, sent
        assert [m["content"] for m in discord.sent[-2:]] == ["My summary", ""]
        assert discord.attached_to(discord.sent[-1]) == [("summary.md", b"# Summary\n")]


async def test_a_process_agent_gets_a_document_in_its_own_folder_and_a_photo_as_an_image(
    temporal_env: WorkflowEnvironment, tmp_path: Path, telegram: FakeTelegram, agent: str
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    takes_images = [*SCRIPTED, "--images"]  # its `initialize` says promptCapabilities.image
    async with running_stack(
        temporal_env.client, tmp_path, configure=with_telegram(telegram, agent)
    ) as stack:
        await stack.call("start_agent", agent_id=agent, dir=str(folder), command=takes_images)
        await eventually(lambda: _ready(stack, agent), timeout=30)
        await connected(stack, "telegram")

        update = telegram.human_sends_file(CHAT, b"TODO: ship\n", file_name="plan.md")

        saved = folder / FOLDER / f"{update_event(update)}-plan.txt"
        await eventually(
            lambda: any(str(saved) in e.get("prompt", "") for e in log_of(folder)), timeout=30
        )
        assert saved.read_text() == "TODO: ship\n"
        [document] = [e for e in log_of(folder) if str(saved) in e.get("prompt", "")]
        assert "images" not in document  # a document is its path only
        await eventually(lambda: _ready(stack, agent))

        update = telegram.human_sends_file(CHAT, JPEG, kind="photo", caption="the bug, see?")
        photo = folder / FOLDER / f"{update_event(update)}.jpg"
        [prompted] = await eventually(
            lambda: [e for e in log_of(folder) if str(photo) in e.get("prompt", "")], timeout=30
        )
        [image] = prompted["images"]
        assert image["mimeType"] == "image/jpeg" and b64decode(image["data"]) == JPEG


async def _ready(stack: Stack, agent: str) -> bool:
    row = await stack.store.get_agent(agent)
    return row is not None and row.state == "ready"


def update_event(update: dict[str, object]) -> str:
    message = update["message"]
    assert isinstance(message, dict)
    return provider_event_id("telegram", CHAT, message["message_id"])


def file_id_of(update: dict[str, object]) -> str:
    message = update["message"]
    assert isinstance(message, dict)
    return str(message["photo"][-1]["file_id"])
