"""Files a human sends an agent: the rules (type by the bytes, a safe name, the agent's own
folder on the gateway's host, the size cap, owner-only) at the lowest level, then once end to
end through Telegram (the real python-telegram-bot against a local Bot API: getFile and the
file download) into a real tmux pane working in its own folder, on a real Temporal dev server
and SQLite."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.errors import AttachmentRefused
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
from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, connected, with_telegram
from tests.support.stack import register, running_stack
from tests.support.tmux import Tmux, pane_command
from tests.support.waiting import eventually

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


async def test_a_telegram_photo_from_alice_is_saved_in_her_agents_folder_and_typed_as_its_path(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    telegram: FakeTelegram,
    agent: str,
    tmux: Tmux,
) -> None:
    stranger = 999
    channels = {f"telegram:{CHAT}": agent, f"telegram:{stranger}": agent}
    work = tmp_path / "work"
    work.mkdir()
    out = tmp_path / "pane.bytes"
    out.touch()
    # A recorder pane working in its own folder, as an agent's pane works in its project.
    tmux.run(
        "new-session", "-d", "-s", "rec", "-c", str(work), f"stty raw -echo; exec cat >> {out}"
    )
    async with running_stack(
        temporal_env.client, tmp_path, configure=with_telegram(telegram, agent, channels=channels)
    ) as stack:
        await eventually(lambda: pane_command(tmux, "rec:0.0") == "cat", timeout=5)
        await register(stack, agent, tmux, "rec:0.0", submit_delay_ms=0)
        await connected(stack, "telegram")

        # A stranger's file is never fetched, not even asked about.
        telegram.human_sends_file(stranger, b"malware?", file_name="run.sh")
        await eventually(lambda: telegram.texts_to(stranger))
        assert "getFile" not in telegram.calls and telegram.downloads == []

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


def update_event(update: dict[str, object]) -> str:
    message = update["message"]
    assert isinstance(message, dict)
    return provider_event_id("telegram", CHAT, message["message_id"])


def file_id_of(update: dict[str, object]) -> str:
    message = update["message"]
    assert isinstance(message, dict)
    return str(message["photo"][-1]["file_id"])
