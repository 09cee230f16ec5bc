"""Discord's sending side: messages through Discord's REST API (split at Discord's
2000-character limit; an answer refers to the human's message), reactions for receipts, and a
message with buttons (an approval's, with a file attached when it does not fit), edited once
answered. discord.py waits out short rate limits and retries Discord's 5xx answers itself;
what it gives up on becomes a :class:`~agentcomms.errors.SendError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Iterator
from typing import Any

import aiohttp
import discord
from discord.http import INTERNAL_API_VERSION, Route

from agentcomms.config import Config, DiscordConfig
from agentcomms.errors import ChatProviderUnavailable, RateLimited, SendRefused
from agentcomms.transports import ReceiptStage, typed_with_note

DISCORD_API = "https://discord.com"
MAX_TEXT = 2000
# Receipts, as reactions on the human's message; "typed" takes the place of "queued".
RECEIPTS: dict[ReceiptStage, str] = {"queued": "👀", "typed": "✍️"}
# discord.py waits out a rate limit up to this long itself (30 s is the least it accepts); a
# longer one becomes RateLimited, and the outbox waits for it instead of holding the activity.
RATE_LIMIT_WAIT_S = 30.0
# A send gives up before the activity's 30 s start-to-close timeout, so the failure says why.
SEND_DEADLINE_S = 25.0
NO_MENTIONS = discord.AllowedMentions.none()  # an agent's "@everyone" pings no one
TOKEN_FIX = "check chat.discord.token (developer portal: your application, Bot, Reset Token)"


def use_endpoint(section: DiscordConfig) -> None:
    """Point discord.py's REST routes at ``base_url`` (or Discord).

    discord.py keeps its API root in a class attribute, so this holds for the whole process:
    a deployment has one Discord configuration, and the gateway and the worker read the same.
    """
    base = (section.base_url or DISCORD_API).rstrip("/")
    Route.BASE = f"{base}/api/v{INTERNAL_API_VERSION}"


class DiscordSender:
    """Sends through one client, logged in at the first send and kept for the worker's life:
    logging in costs two requests (``/users/@me``, ``/oauth2/applications/@me``), which
    would double a reply and make a receipt four requests. No gateway connection is opened."""

    max_chars = MAX_TEXT

    def __init__(self, cfg: Config) -> None:
        self._section = cfg.chat.discord
        self._logged_in: discord.Client | None = None
        self._login = asyncio.Lock()  # outboxes send at once; the first logs in for all

    @contextlib.asynccontextmanager
    async def _client(self, chat_id: str) -> Any:
        with discord_errors(chat_id):
            async with asyncio.timeout(SEND_DEADLINE_S):
                yield await self._client_logged_in()

    async def _client_logged_in(self) -> discord.Client:
        async with self._login:
            if self._logged_in is not None:
                return self._logged_in
            assert self._section.token is not None
            use_endpoint(self._section)
            client = discord.Client(
                # Sending needs no gateway events; guilds only keeps discord.py from warning.
                intents=discord.Intents(guilds=True),
                max_messages=None,
                max_ratelimit_timeout=RATE_LIMIT_WAIT_S,
            )
            try:
                await client.login(self._section.token.get_secret_value())
            except BaseException:
                await client.close()  # a refused token or Discord away: the next send tries anew
                raise
            self._logged_in = client
            return client

    async def send_text(self, chat_id: str, text: str, *, reply_to: str | None = None) -> str:
        channel_id = _channel_id(chat_id)
        async with self._client(chat_id) as client:
            reference = (
                discord.MessageReference(
                    message_id=int(reply_to), channel_id=channel_id, fail_if_not_exists=False
                )
                if reply_to and reply_to.isdigit()
                else None
            )
            sent = await client.get_partial_messageable(channel_id).send(
                text, reference=reference, allowed_mentions=NO_MENTIONS
            )
        return str(sent.id)

    async def send_file(
        self, chat_id: str, name: str, data: bytes, *, reply_to: str | None = None
    ) -> str:
        """A file as an attachment of a message of its own."""
        channel_id = _channel_id(chat_id)
        async with self._client(chat_id) as client:
            sent = await client.get_partial_messageable(channel_id).send(
                file=discord.File(io.BytesIO(data), filename=name), allowed_mentions=NO_MENTIONS
            )
        return str(sent.id)

    async def send_buttons(
        self,
        chat_id: str,
        text: str,
        buttons: list[tuple[str, str]],
        *,
        attached: tuple[str, str] | None = None,
    ) -> str:
        """`text` with one row of buttons (message components), each (label, what a press
        sends back as its ``custom_id``); a press reaches the gateway's bot as an interaction.
        ``attached`` is a text file sent with it, (file name, text): what does not fit in one
        message, read in Discord's preview of the file."""
        channel_id = _channel_id(chat_id)
        view = _row(buttons)
        file: dict[str, Any] = {}
        if attached is not None:
            name, content = attached
            file["file"] = discord.File(io.BytesIO(content.encode()), filename=name)
        async with self._client(chat_id) as client:
            sent = await client.get_partial_messageable(channel_id).send(
                text[:MAX_TEXT], view=view, allowed_mentions=NO_MENTIONS, **file
            )
        return str(sent.id)

    async def edit_buttons(
        self, chat_id: str, message_id: str, buttons: list[tuple[str, str]]
    ) -> None:
        """Replace a message's row of buttons, its text (and any file) kept."""
        channel_id = _channel_id(chat_id)
        async with self._client(chat_id) as client:
            message = client.get_partial_messageable(channel_id).get_partial_message(
                int(message_id)
            )
            await message.edit(view=_row(buttons))

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """Replace a message's text; its buttons go (a file attached to it stays)."""
        channel_id = _channel_id(chat_id)
        async with self._client(chat_id) as client:
            message = client.get_partial_messageable(channel_id).get_partial_message(
                int(message_id)
            )
            await message.edit(content=text[:MAX_TEXT], view=None)

    async def receipt(
        self, chat_id: str, message_id: str, stage: ReceiptStage, *, note: str | None = None
    ) -> None:
        channel_id = _channel_id(chat_id)
        async with self._client(chat_id) as client:
            message = client.get_partial_messageable(channel_id).get_partial_message(
                int(message_id)
            )
            await message.add_reaction(RECEIPTS[stage])
            if stage == "typed" and client.user is not None:
                await message.remove_reaction(RECEIPTS["queued"], client.user)
        if note:  # a reaction cannot say what typing changed
            await self.send_text(chat_id, typed_with_note(note), reply_to=message_id)

    async def close(self) -> None:
        async with self._login:
            client, self._logged_in = self._logged_in, None
        if client is not None:
            await client.close()


def _row(buttons: list[tuple[str, str]]) -> discord.ui.View:
    """One row of buttons, each (label, what a press sends back as its ``custom_id``)."""
    view = discord.ui.View(timeout=None)
    for label, data in buttons:
        view.add_item(discord.ui.Button(label=label, custom_id=data))
    # A stopped view is only its components: this client keeps no callbacks for it (the
    # presses reach the receiver's bot, on the gateway connection).
    view.stop()
    return view


def _channel_id(chat_id: str) -> int:
    if not chat_id.isdigit():
        raise SendRefused(
            f"{chat_id!r} is not a Discord channel id (a number: Developer Mode, right-click "
            "the channel, Copy Channel ID)"
        )
    return int(chat_id)


@contextlib.contextmanager
def discord_errors(chat_id: str) -> Iterator[None]:
    """Discord's errors as SendError: wait, retry with backoff, or fail with what to fix."""
    try:
        yield
    except discord.RateLimited as exc:
        raise RateLimited(f"Discord: {exc}", exc.retry_after) from exc
    except discord.LoginFailure as exc:
        raise SendRefused(f"Discord refused the bot token: {TOKEN_FIX}") from exc
    except discord.Forbidden as exc:
        raise SendRefused(
            f"Discord does not let the bot write in channel {chat_id} ({exc.text}): invite the "
            "bot to that server and give it View Channel, Send Messages, Read Message History "
            "and Add Reactions there (a person must share a server with the bot to be sent a "
            "direct message)"
        ) from exc
    except discord.NotFound as exc:
        raise SendRefused(
            f"Discord does not know channel {chat_id} or its message ({exc.text}): check the "
            "channel id (Developer Mode, Copy Channel ID) and that the bot is in its server"
        ) from exc
    except discord.DiscordServerError as exc:
        raise ChatProviderUnavailable(f"Discord answered {exc.status}: {exc.text}") from exc
    except discord.HTTPException as exc:
        if exc.status == 429:  # refused at Discord's edge, without a rate-limit body
            retry_after = exc.response.headers.get("Retry-After", "")
            wait = float(retry_after) if retry_after.replace(".", "", 1).isdigit() else 5.0
            raise RateLimited(f"Discord: too many requests ({exc.text})", wait) from exc
        if exc.status == 401:
            raise SendRefused(f"Discord refused the bot token: {TOKEN_FIX}") from exc
        raise SendRefused(
            f"Discord refused the message to channel {chat_id} ({exc.status}: {exc.text})"
        ) from exc
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise ChatProviderUnavailable(
            f"Discord did not answer: {exc or type(exc).__name__}"
        ) from exc
