"""Chat providers' fakes (tests/fakes) wired into a stack: the fakes as fixtures, the stack's
configuration that points a provider at its fake and maps its chats to an agent, and the
providers' side of the webhooks.

Alice is the allowed human everywhere: her Telegram chat is ``CHAT``, her phone number
``ALICE`` (SMS and WhatsApp), her Discord user ``DISCORD_ALICE``, her Slack user ``SLACK_ALICE``;
``STRANGER`` is a number nobody allowed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, DiscordConfig, SlackConfig
from tests.fakes.discord import FakeDiscord
from tests.fakes.serve import free_port
from tests.fakes.slack import ALICE as SLACK_ALICE
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.fakes.twilio import OUR_NUMBER, FakeTwilio
from tests.fakes.whatsapp_cloud import VERIFY_TOKEN, FakeWhatsAppCloud
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually

CHAT = 456  # Alice's private chat with the Telegram bot (its id is her user id)
ALICE = "+15551234567"
STRANGER = "+15559990000"
DISCORD_ALICE = 4242  # the fake Discord's default author
PUBLIC_URL = "https://agents.example.test/relay"  # a tunnel: not where the gateway listens
# A photo's first bytes: enough for a content type the webhook calls image/jpeg.
PHOTO = b"\xff\xd8\xff\xe0" + b"\0" * 64

Configure = Callable[[Config], Config]


@pytest.fixture
def agent() -> str:
    """The agent the test's chats are mapped to, unique to the test (the dev server is shared)."""
    return f"backend-{uuid.uuid4().hex[:8]}"


async def provider_status(stack: Stack, name: str) -> dict[str, Any]:
    """The provider's line in the gateway's status."""
    status = await stack.call("status")
    return next(p for p in status["providers"] if p["name"] == name)


async def provider_is(stack: Stack, name: str, state: str) -> bool:
    status: str = (await provider_status(stack, name))["status"]
    return status == state


async def connected(stack: Stack, name: str) -> None:
    """Wait until the gateway reports the provider connected (logged in, receiving)."""
    await eventually(lambda: provider_is(stack, name, "connected"), timeout=20, interval=0.1)


# ---- Telegram ------------------------------------------------------------------------------------


@asynccontextmanager
async def running_telegram(*known_chats: int) -> AsyncIterator[FakeTelegram]:
    """Telegram's Bot API on a local port, for a test or a whole module; `known_chats` have
    written to the bot before (Telegram lets a bot write only to those)."""
    fake = FakeTelegram()
    fake.known_chats.update(known_chats)
    async with fake.server:
        yield fake


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    """Telegram's Bot API on a local port."""
    async with running_telegram() as fake:
        yield fake


def with_telegram(
    fake: FakeTelegram, agent: str, *, channels: dict[str, str] | None = None, **extra: Any
) -> Configure:
    """Telegram on `fake`; the chat ``CHAT`` (or `channels`) mapped to `agent`; Alice allowed."""

    def configure(cfg: Config) -> Config:
        chat = cfg.chat.model_copy(
            update={
                "telegram": cfg.chat.telegram.model_copy(
                    update={
                        "enabled": True,
                        "token": SecretStr(fake.token),
                        "base_url": fake.base_url,
                        **extra,
                    }
                ),
                "channels": channels or {f"telegram:{CHAT}": agent},
                "allowed_senders": {"telegram": [str(CHAT)]},
            }
        )
        return cfg.model_copy(update={"chat": chat})

    return configure


@pytest.fixture
async def telegram_stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, telegram: FakeTelegram, agent: str
) -> AsyncIterator[Stack]:
    """A whole stack with Telegram on its fake, Alice's chat mapped to `agent`."""
    async with running_stack(
        temporal_env.client, tmp_path, configure=with_telegram(telegram, agent)
    ) as s:
        yield s


# ---- Discord ------------------------------------------------------------------------------------


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    """Discord's REST API and gateway WebSocket on a local port."""
    fake = FakeDiscord()
    await fake.start()
    yield fake
    await fake.stop()


def with_discord(fake: FakeDiscord, agent: str, *channels: int, **extra: Any) -> Configure:
    """Discord on `fake`, its general channel (and `channels`) mapped to `agent`; Alice allowed."""

    def configure(cfg: Config) -> Config:
        chat = cfg.chat.model_copy(
            update={
                "discord": DiscordConfig(
                    enabled=True,
                    token=SecretStr(fake.token),
                    base_url=fake.base_url,
                    guild_id=str(fake.guild_id),
                    **extra,
                ),
                "channels": {f"discord:{c}": agent for c in (fake.general, *channels)},
                "allowed_senders": {"discord": [str(DISCORD_ALICE)]},
            }
        )
        return cfg.model_copy(update={"chat": chat})

    return configure


@pytest.fixture
async def discord_stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, discord: FakeDiscord, agent: str
) -> AsyncIterator[Stack]:
    """A whole stack with Discord on its fake, the general channel mapped to `agent`."""
    async with running_stack(
        temporal_env.client, tmp_path, configure=with_discord(discord, agent)
    ) as s:
        yield s


# ---- Slack ---------------------------------------------------------------------------------------


@asynccontextmanager
async def running_slack() -> AsyncIterator[FakeSlack]:
    """Slack's Web API and Socket Mode WebSocket on a local port, for a test or a whole module."""
    fake = FakeSlack()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    """Slack's Web API and Socket Mode WebSocket on a local port."""
    async with running_slack() as fake:
        yield fake


def with_slack(
    fake: FakeSlack, agent: str, *channels: str, port: int | None = None, **extra: Any
) -> Configure:
    """Slack on `fake`, its general channel (and `channels`) mapped to `agent`; Alice allowed.
    ``mode="http"`` takes the Events API on `port`, behind ``PUBLIC_URL``."""

    def configure(cfg: Config) -> Config:
        chat = cfg.chat.model_copy(
            update={
                "slack": SlackConfig(
                    enabled=True,
                    bot_token=SecretStr(fake.bot_token),
                    app_token=SecretStr(fake.app_token),
                    signing_secret=SecretStr(fake.signing_secret),
                    base_url=fake.base_url,
                    **extra,
                ),
                "channels": {f"slack:{c}": agent for c in (fake.general, *channels)},
                "allowed_senders": {"slack": [SLACK_ALICE]},
            }
        )
        if port is None:
            return cfg.model_copy(update={"chat": chat})
        server = cfg.server.model_copy(update={"http_port": port, "public_url": PUBLIC_URL})
        return cfg.model_copy(update={"chat": chat, "server": server})

    return configure


# ---- SMS and WhatsApp through Twilio -------------------------------------------------------------


@pytest.fixture
async def twilio() -> AsyncIterator[FakeTwilio]:
    """Twilio's Messages API (and its media) on a local port."""
    fake = FakeTwilio()
    async with fake.server:
        yield fake


def with_twilio(
    fake: FakeTwilio, agent: str, port: int, *, receipts: dict[str, str] | None = None
) -> Configure:
    """SMS and WhatsApp through Twilio on `fake`, Alice's number mapped to `agent` on both; the
    gateway takes webhooks on `port`, behind ``PUBLIC_URL``."""
    receipts = receipts or {}

    def configure(cfg: Config) -> Config:
        section = {
            "enabled": True,
            "account_sid": fake.account_sid,
            "auth_token": SecretStr(fake.auth_token),
            "from_number": OUR_NUMBER,
            "base_url": fake.base_url,
        }
        chat = cfg.chat.model_copy(
            update={
                "sms": cfg.chat.sms.model_copy(update=section | _receipts(receipts, "sms")),
                "whatsapp": cfg.chat.whatsapp.model_copy(
                    update=section | _receipts(receipts, "whatsapp")
                ),
                "channels": {f"sms:{ALICE}": agent, f"whatsapp:{ALICE}": agent},
                "allowed_senders": {"sms": [ALICE], "whatsapp": [ALICE]},
            }
        )
        server = cfg.server.model_copy(update={"http_port": port, "public_url": PUBLIC_URL})
        return cfg.model_copy(update={"chat": chat, "server": server})

    return configure


@pytest.fixture
async def twilio_stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio: FakeTwilio, agent: str
) -> AsyncIterator[tuple[Stack, Hooks]]:
    """A whole stack taking Twilio's SMS and WhatsApp webhooks, Alice's number mapped to
    `agent`, and Twilio's side of those webhooks."""
    port = free_port()
    async with running_stack(
        temporal_env.client, tmp_path, configure=with_twilio(twilio, agent, port)
    ) as s:
        yield s, Hooks(twilio, port)


def _receipts(receipts: dict[str, str], provider: str) -> dict[str, str]:
    return {"receipts": receipts[provider]} if provider in receipts else {}


class Hooks:
    """Twilio's side of the webhooks: where it posts (local) and what it signs (public)."""

    def __init__(self, fake: FakeTwilio, port: int) -> None:
        self.fake = fake
        self.port = port

    async def post(self, flavour: str, form: dict[str, str], **kw: Any) -> httpx.Response:
        path = f"/webhooks/twilio/{flavour}"
        return await self.fake.post_webhook(
            f"http://127.0.0.1:{self.port}{path}", PUBLIC_URL + path, form, **kw
        )

    async def texts(self, sender: str, body: str, **incoming: Any) -> tuple[str, str]:
        """`sender` texts `body` by SMS (by WhatsApp with ``whatsapp=True``; ``profile_name``,
        ``media``… as :meth:`FakeTwilio.incoming` takes them), signed as Twilio signs it: (the
        gateway's answer, the message's sid), once the gateway took the message."""
        form = self.fake.incoming(sender, body, **incoming)
        answer = await self.post("whatsapp" if incoming.get("whatsapp") else "sms", form)
        assert answer.status_code == 200, answer.text
        return answer.text, form["MessageSid"]


# ---- WhatsApp through Meta's Cloud API -----------------------------------------------------------


@pytest.fixture
async def meta() -> AsyncIterator[FakeWhatsAppCloud]:
    """Meta's Graph API (messages, media) on a local port."""
    fake = FakeWhatsAppCloud()
    async with fake.server:
        yield fake


def cloud_section(fake: FakeWhatsAppCloud, **extra: Any) -> dict[str, Any]:
    """The `chat.whatsapp` settings of the Cloud API on `fake`."""
    return {
        "enabled": True,
        "api": "cloud",
        "access_token": SecretStr(fake.access_token),
        "phone_number_id": fake.phone_number_id,
        "app_secret": SecretStr(fake.app_secret),
        "verify_token": SecretStr(VERIFY_TOKEN),
        "base_url": fake.base_url,
        **extra,
    }


def with_cloud(
    fake: FakeWhatsAppCloud, agent: str, port: int, *, public_url: str | None = PUBLIC_URL
) -> Configure:
    """WhatsApp through the Cloud API on `fake`: Alice's and the stranger's numbers mapped to
    `agent`, Alice alone allowed; the gateway takes webhooks on `port`."""

    def configure(cfg: Config) -> Config:
        chat = cfg.chat.model_copy(
            update={
                "whatsapp": cfg.chat.whatsapp.model_copy(update=cloud_section(fake)),
                "channels": {f"whatsapp:{ALICE}": agent, f"whatsapp:{STRANGER}": agent},
                "allowed_senders": {"whatsapp": [ALICE]},
            }
        )
        server = cfg.server.model_copy(update={"http_port": port, "public_url": public_url})
        return cfg.model_copy(update={"chat": chat, "server": server})

    return configure


@pytest.fixture
async def cloud_stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, meta: FakeWhatsAppCloud, agent: str
) -> AsyncIterator[tuple[Stack, Hook]]:
    """A whole stack taking WhatsApp's Cloud API webhooks, Alice's and the stranger's numbers
    mapped to `agent`, and Meta's side of that webhook."""
    port = free_port()
    async with running_stack(
        temporal_env.client, tmp_path, configure=with_cloud(meta, agent, port)
    ) as s:
        yield s, Hook(meta, port)


class Hook:
    """Meta's side of the webhook: it posts to where the gateway listens."""

    def __init__(self, fake: FakeWhatsAppCloud, port: int) -> None:
        self.fake = fake
        self.port = port
        self.url = f"http://127.0.0.1:{port}/webhooks/whatsapp"

    async def post(self, call: dict[str, Any] | bytes, **kw: Any) -> httpx.Response:
        return await self.fake.post_webhook(self.url, call, **kw)


def wamid_of(call: dict[str, Any]) -> str:
    """The WhatsApp message id in a webhook call Meta makes."""
    return str(call["entry"][0]["changes"][0]["value"]["messages"][0]["id"])
