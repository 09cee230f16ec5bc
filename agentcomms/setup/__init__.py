"""Guided setup of a chat provider (``agentcomms setup PROVIDER``): what each provider does for it.

The steps are the same for every provider and live in :mod:`agentcomms.cli.setup_cmd`: take the
token, check it, write the config, wait for the human's first message, admit them and map their
chat once they confirm, then a test message both ways. What differs is one row of
:data:`PROVIDERS` and one small module, ``agentcomms/setup/<provider>.py``, whose ``open_session``
returns a :class:`SetupSession` that talks to the provider through its SDK, before any gateway
runs. A new provider is a row and a module.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from agentcomms.config import Config
    from agentcomms.transports import InboundMessage


@dataclass(frozen=True)
class Bot:
    """Who the token belongs to, as the provider answered."""

    name: str  # how the human finds it: "@ac_bot"
    # Where to go to write to it, in words: a link to the chat, or how to invite it first.
    how_to_write: str


class SetupSession(Protocol):
    """One provider, reached with the token being set up (``cfg`` holds it and its base_url)."""

    async def check(self) -> Bot:
        """Ask the provider who the token belongs to; :class:`~agentcomms.errors.SetupFailed` with its answer."""
        ...

    async def listen(self) -> None:
        """Start hearing the bot's messages; return once what is written from now on will
        arrive (the human is told to write only then)."""
        ...

    def messages(self) -> AsyncIterator[InboundMessage]:
        """Messages people write to the bot from now on (and, where the provider keeps them,
        those written since the bot was last read), oldest first; endless."""
        ...

    async def send(self, chat_id: str, text: str) -> None:
        """Send ``text`` to the chat; :class:`~agentcomms.errors.SetupFailed` with the provider's answer."""
        ...

    async def close(self) -> None:
        """Let go of the provider; what was read is not read again by the gateway."""
        ...


@dataclass(frozen=True)
class Provider:
    """One row: a chat provider that ``agentcomms setup`` knows how to set up."""

    name: str  # as in chat.<name> and in channel ids
    title: str
    token_variable: str  # where the token is read from when the config names no variable
    where_the_token_is: str  # told before the token is asked for

    def open_session(self, cfg: Config) -> SetupSession:
        module = importlib.import_module(f"{__name__}.{self.name}")
        session: SetupSession = module.open_session(cfg)
        return session


PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider(
            "telegram",
            "Telegram",
            "TELEGRAM_BOT_TOKEN",
            "Create a bot with @BotFather (/newbot) or pick one (/mybots, API Token) and copy "
            "its token.",
        ),
        Provider(
            "discord",
            "Discord",
            "DISCORD_BOT_TOKEN",
            "In the Discord developer portal (https://discord.com/developers/applications), "
            "your application, Bot: Reset Token, and switch on Message Content Intent.",
        ),
    )
}
