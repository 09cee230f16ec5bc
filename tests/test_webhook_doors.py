"""The gateway's webhook server as a web page and a stranger attack it: a rebinding Host, another
site's Origin, a 50 MB body (declared, or chunked without end), a request without its signature.
Each is refused before the body is read whole, and the gateway keeps serving the providers, whose
Host is the public one. Real gateway, Temporal, tmux and SQLite; the providers' fakes sign."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config
from agentcomms.http_guard import MAX_WEBHOOK_BODY
from agentcomms.ids import provider_event_id
from tests.fakes.serve import free_port
from tests.fakes.twilio import FakeTwilio
from tests.fakes.whatsapp_cloud import FakeWhatsAppCloud
from tests.support.chat import ALICE, PUBLIC_URL, Configure, with_cloud, with_twilio
from tests.support.raw_http import knock
from tests.support.stack import Stack, register_recorder, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

PUBLIC_HOST = urlsplit(PUBLIC_URL).netloc
FIFTY_MB = 50_000_000
TELEGRAM_SECRET = "s3cret-token"
ALIAS = "relay.internal"  # a reverse proxy's name for the gateway (server.allowed_hosts)


@dataclass
class Door:
    """One webhook route, and the header its provider signs with."""

    path: str
    signature_header: str
    content_type: str


SMS = Door("/webhooks/twilio/sms", "X-Twilio-Signature", "application/x-www-form-urlencoded")
TWILIO_WHATSAPP = Door(
    "/webhooks/twilio/whatsapp", "X-Twilio-Signature", "application/x-www-form-urlencoded"
)
TELEGRAM = Door("/webhooks/telegram", "X-Telegram-Bot-Api-Secret-Token", "application/json")
CLOUD = Door("/webhooks/whatsapp", "X-Hub-Signature-256", "application/json")


def with_twilio_and_telegram(fake: FakeTwilio, agent: str, port: int) -> Configure:
    def configure(cfg: Config) -> Config:
        cfg = with_twilio(fake, agent, port)(cfg)
        telegram = cfg.chat.telegram.model_copy(
            update={
                "enabled": True,
                "token": SecretStr("123:not-used"),
                "base_url": "http://127.0.0.1:9",  # never reached: the test posts its webhook
                "mode": "webhook",
                "webhook_secret": SecretStr(TELEGRAM_SECRET),
            }
        )
        server = cfg.server.model_copy(update={"allowed_hosts": [ALIAS]})
        chat = cfg.chat.model_copy(update={"telegram": telegram})
        return cfg.model_copy(update={"chat": chat, "server": server})

    return configure


@pytest.fixture
async def twilio_stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio: FakeTwilio, agent: str
) -> AsyncIterator[tuple[Stack, int]]:
    port = free_port()
    configure = with_twilio_and_telegram(twilio, agent, port)
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as s:
        yield s, port


@pytest.fixture
async def cloud_stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, meta: FakeWhatsAppCloud, agent: str
) -> AsyncIterator[tuple[Stack, int]]:
    port = free_port()
    async with running_stack(
        temporal_env.client, tmp_path, configure=with_cloud(meta, agent, port)
    ) as s:
        yield s, port


def _megabyte_chunks() -> Iterator[bytes]:
    """A chunked body that would go on for 50 MB; a door that reads it whole never answers."""
    for _ in range(FIFTY_MB // 65_536):
        yield b"x" * 65_536


async def _attacks_refused(port: int, door: Door) -> None:
    """What a stranger can send to ``door`` without its provider's secret is refused, and
    before its body is read whole."""
    local = f"127.0.0.1:{port}"
    # Forged, but present: the door reads the body to check it. (Telegram's secret is checked
    # as it stands, before the body: this one is the right one.)
    forged = TELEGRAM_SECRET if door is TELEGRAM else "sha256=forged"
    signed = {door.signature_header: forged, "Content-Type": door.content_type}
    # DNS rebinding: a web page whose own name points at this machine.
    async with httpx.AsyncClient(base_url=f"http://{local}") as http:
        for headers in (
            {"Host": f"evil.example:{port}"},
            {"Host": "evil.example"},
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
        ):
            answer = await http.post(door.path, content=b"{}", headers=signed | headers)
            assert answer.status_code == 403, (headers, answer.text)
            assert "forbidden" in answer.text

    # 50 MB declared, a few bytes sent: refused at once, nothing more is waited for.
    declared = await knock(
        port, door.path, {"Host": local, "Content-Length": str(FIFTY_MB)} | signed, body=b"abc"
    )
    assert declared.status == 413 and f"{MAX_WEBHOOK_BODY:,}" in declared.text
    # Chunked, with no length to check: read up to the cap, then refused without its end.
    chunked = await knock(
        port,
        door.path,
        {"Host": local, "Transfer-Encoding": "chunked"} | signed,
        chunks=_megabyte_chunks(),
    )
    assert chunked.status == 413, chunked.text
    assert chunked.sent < FIFTY_MB  # answered while the body was still coming
    # No signature header: refused before the body, which is never sent, is read.
    unsigned = await knock(
        port,
        door.path,
        {"Host": local, "Content-Length": "1000", "Content-Type": door.content_type},
    )
    assert unsigned.status == 403 and door.signature_header in unsigned.text


async def test_strangers_at_twilio_and_telegram_doors_are_refused_and_alice_still_gets_through(
    twilio_stack: tuple[Stack, int], twilio: FakeTwilio, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    stack, port = twilio_stack
    pane = await register_recorder(stack, tmux, tmp_path, agent)
    for door in (SMS, TWILIO_WHATSAPP, TELEGRAM):
        await _attacks_refused(port, door)
    assert [e for e in await stack.store.events_after(agent, None, 10)] == []

    # Twilio posts to the public URL: its Host is the public one, and it is served; so is a
    # name the operator allowed (a proxy in front of the gateway).
    typed: list[bytes] = []
    for host in (PUBLIC_HOST, f"{ALIAS}:{port}"):
        form = twilio.incoming(ALICE, f"still here via {host}")
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"http://127.0.0.1:{port}{SMS.path}",
                content=urlencode(form),
                headers={
                    "Host": host,
                    "Content-Type": SMS.content_type,
                    SMS.signature_header: twilio.signature(PUBLIC_URL + SMS.path, form),
                },
            )
        assert answer.status_code == 200, answer.text
        typed.append(f"[sms:{ALICE} from {ALICE}] still here via {host}\r".encode())
        await eventually(lambda: pane.read_bytes() == b"".join(typed))
        assert await stack.store.get_event(provider_event_id("sms", ALICE, form["MessageSid"]))


async def test_strangers_at_the_cloud_api_door_are_refused_and_alice_still_gets_through(
    cloud_stack: tuple[Stack, int], meta: FakeWhatsAppCloud, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    stack, port = cloud_stack
    pane = await register_recorder(stack, tmux, tmp_path, agent)
    await _attacks_refused(port, CLOUD)

    call = meta.incoming(ALICE, "still here", name="Alice")
    body = json.dumps(call).encode()
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"http://127.0.0.1:{port}{CLOUD.path}",
            content=body,
            headers={
                "Host": f"localhost:{port}",  # a tunnel that rewrites the Host to the local one
                "Content-Type": CLOUD.content_type,
                CLOUD.signature_header: meta.sign(body),
            },
        )
    assert answer.status_code == 200, answer.text
    await eventually(
        lambda: pane.read_bytes() == f"[whatsapp:{ALICE} from Alice] still here\r".encode()
    )
