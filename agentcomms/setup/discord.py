"""Setting up Discord: logging in checks the token (``/users/@me``, then the application, whose id
makes the invite link), a gateway connection with the message-content intent hears the human
(Discord keeps no queue of a bot's messages to ask for, as Telegram does: only what is written
while the bot is connected arrives), and the REST API sends the test message. A gateway running
meanwhile does no harm: a bot may hold several connections."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket

from agentcomms.config import Config, DiscordConfig
from agentcomms.errors import SendError, SetupFailed
from agentcomms.setup import Bot
from agentcomms.transports import InboundMessage
from agentcomms.transports._discord_sender import (
    DISCORD_API,
    NO_MENTIONS,
    TOKEN_FIX,
    discord_errors,
    use_endpoint,
)
from agentcomms.transports.discord import inbound, intents

# What the bot needs in a server: View Channels, Send Messages, Read Message History, Add
# Reactions (the permissions the Discord page of the manual lists).
PERMISSIONS = (1 << 10) | (1 << 11) | (1 << 16) | (1 << 6)
CONNECT_S = 30.0  # discord.py retries a gateway it cannot reach for ever: setup says so instead


class _Listener(discord.Client):
    def __init__(self, queue: asyncio.Queue[discord.Message]) -> None:
        super().__init__(intents=intents(), max_messages=None)
        self._queue = queue

    async def on_message(self, message: discord.Message) -> None:
        self._queue.put_nowait(message)


class DiscordSetup:
    def __init__(self, section: DiscordConfig) -> None:
        assert section.token is not None
        self._section = section
        self._token = section.token.get_secret_value()
        self._queue: asyncio.Queue[discord.Message] = asyncio.Queue()
        self._client = _Listener(self._queue)
        self._connection: asyncio.Task[None] | None = None

    async def check(self) -> Bot:
        use_endpoint(self._section)
        try:
            await self._client.login(self._token)
        except discord.LoginFailure:
            raise SetupFailed(
                f"Discord refused the token (401: Unauthorized): {TOKEN_FIX}, then run setup again"
            ) from None
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            raise SetupFailed(self._unreachable(exc)) from None
        user, app_id = self._client.user, self._client.application_id
        name = user.name if user is not None else "the bot"
        invite = (
            f"https://discord.com/oauth2/authorize?client_id={app_id}&scope=bot"
            f"&permissions={PERMISSIONS}"
        )
        return Bot(
            name=name,
            how_to_write=f"invite it to your server if it is not there yet ({invite}), then write "
            "in a channel it can read, or send it a direct message",
        )

    async def listen(self) -> None:
        self._connection = asyncio.create_task(self._connect(), name="discord setup")
        ready = asyncio.ensure_future(self._client.wait_until_ready())
        await asyncio.wait(
            {ready, self._connection}, timeout=CONNECT_S, return_when=asyncio.FIRST_COMPLETED
        )
        if not ready.done():
            ready.cancel()
            if self._connection.done():
                self._connection.result()  # raises why the connection ended
            raise SetupFailed(
                f"Discord's gateway did not let the bot in within {CONNECT_S:.0f} s: check your "
                "network (or chat.discord.base_url), then run setup again"
            )

    async def messages(self) -> AsyncIterator[InboundMessage]:
        assert self._connection is not None, "listen() first"
        own_id = self._client.user.id if self._client.user else None
        while True:
            waiting = asyncio.ensure_future(self._queue.get())
            await asyncio.wait({waiting, self._connection}, return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():
                waiting.cancel()
                self._connection.result()  # raises why the connection ended
                raise SetupFailed("the Discord gateway ended the connection: run setup again")
            found = inbound(waiting.result(), own_id=own_id, guild_id=self._section.guild_id)
            if found is not None:
                yield found

    async def _connect(self) -> None:
        try:
            if self._section.base_url:
                # discord.py goes straight to Discord's gateway; elsewhere, ask where it is.
                _, url, _ = await self._client.http.get_bot_gateway()
                DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
            await self._client.connect(reconnect=True)
        except discord.PrivilegedIntentsRequired:
            raise SetupFailed(
                "Discord refused the Message Content intent: enable it in the developer portal "
                "(your application, Bot, Privileged Gateway Intents, Message Content Intent), "
                "then run setup again"
            ) from None
        except discord.ConnectionClosed as exc:
            if exc.code == 4004:
                raise SetupFailed(f"Discord refused the token: {TOKEN_FIX}") from None
            raise SetupFailed(
                f"Discord closed the gateway connection (code {exc.code}: {exc.reason}): run "
                "setup again"
            ) from None
        except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            raise SetupFailed(self._unreachable(exc)) from None

    async def send(self, chat_id: str, text: str) -> None:
        try:
            with discord_errors(chat_id):
                channel = self._client.get_partial_messageable(int(chat_id))
                await channel.send(text, allowed_mentions=NO_MENTIONS)
        except SendError as exc:
            raise SetupFailed(str(exc)) from None

    async def close(self) -> None:
        await self._client.close()
        if self._connection is not None:
            self._connection.cancel()
            with contextlib.suppress(asyncio.CancelledError, SetupFailed):
                await self._connection

    def _unreachable(self, exc: Any) -> str:
        where = (self._section.base_url or DISCORD_API).rstrip("/")
        return (
            f"Discord's API at {where} did not answer as Discord does ({exc}): check your "
            "network, or chat.discord.base_url (--base-url) if you go through a proxy"
        )


def open_session(cfg: Config) -> DiscordSetup:
    return DiscordSetup(cfg.chat.discord)
