"""Discord, through discord.py: a bot on the Discord gateway, sending through Discord's REST API.

Receiving: the bot keeps a gateway connection with the message-content intent. discord.py
resumes a dropped session itself, and Discord then replays what the bot missed; when the
connection cannot be resumed (a refused token, the gateway closing for good), a new client
connects after a backoff. A new session replays nothing, so on each one the bot reads what its
mapped channels received since the last message it handled (at first start, since a few minutes
before it): a gateway restarted meanwhile loses nothing, and what it had handled already is
the same event again. Messages are handled one at a time, in the order Discord sent them.
The gateway delivers a message once and never again, so one that the gateway could not keep
(Temporal unreachable) is retried here until it is kept, holding later ones back. Its event id
comes from the channel and message id: a message seen twice is one event.

Kept out: the bot's own messages, other bots' and webhooks', system messages (pins, joins), and,
when ``chat.discord.guild_id`` is set, messages from other servers. Direct messages count.

Sending: ``POST /channels/{id}/messages`` (split at Discord's 2000-character limit; an answer
refers to the human's message), reactions for receipts. discord.py waits out short rate limits
and retries Discord's 5xx answers itself; what it gives up on becomes a
:class:`~agentcomms.errors.SendError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import INTERNAL_API_VERSION, Route

from agentcomms.config import Config, DiscordConfig
from agentcomms.errors import ChatProviderUnavailable, RateLimited, SendRefused
from agentcomms.models import utcnow
from agentcomms.transports import (
    InboundMessage,
    InboundResult,
    InboundSink,
    LinkState,
    LinkStatus,
    ReceiptStage,
    typed_with_note,
)

log = logging.getLogger(__name__)

# agentcomms never joins voice channels: discord.py's warning that voice libraries are missing
# would only send a reader of the gateway's log looking for them.
discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False

NAME = "discord"
DISCORD_API = "https://discord.com"
MAX_TEXT = 2000
# Receipts, as reactions on the human's message; "typed" takes the place of "queued".
RECEIPTS: dict[ReceiptStage, str] = {"queued": "👀", "typed": "✍️"}
# discord.py waits out a rate limit up to this long itself (30 s is the least it accepts); a
# longer one becomes RateLimited, and the outbox waits for it instead of holding the activity.
RATE_LIMIT_WAIT_S = 30.0
# A send gives up before the activity's 30 s start-to-close timeout, so the failure says why.
SEND_DEADLINE_S = 25.0
RECONNECT_FIRST_S = 1.0
# How far back a gateway that starts reads its mapped channels for what it missed meanwhile.
CATCH_UP_WINDOW = timedelta(minutes=15)
CATCH_UP_LIMIT = 100  # messages per channel
RECONNECT_CAP_S = 60.0
NO_MENTIONS = discord.AllowedMentions.none()  # an agent's "@everyone" pings no one
TAKEN_TYPES = (discord.MessageType.default, discord.MessageType.reply)
TOKEN_FIX = "check chat.discord.token (developer portal: your application, Bot, Reset Token)"
INTENT_FIX = (
    "Discord refused the Message Content intent: enable it in the developer portal (your "
    "application, Bot, Privileged Gateway Intents, Message Content Intent), then restart the "
    "gateway"
)


def intents() -> discord.Intents:
    wanted = discord.Intents.none()
    wanted.guilds = True  # server channels are known, so a message says which server it is from
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = True  # without it, Discord sends server messages with no text
    return wanted


def use_endpoint(section: DiscordConfig) -> None:
    """Point discord.py's REST routes at ``base_url`` (or Discord).

    discord.py keeps its API root in a class attribute, so this holds for the whole process:
    a deployment has one Discord configuration, and the gateway and the worker read the same.
    """
    base = (section.base_url or DISCORD_API).rstrip("/")
    Route.BASE = f"{base}/api/v{INTERNAL_API_VERSION}"


def inbound(
    message: discord.Message, *, own_id: int | None, guild_id: str | None
) -> InboundMessage | None:
    """The message as agentcomms sees it; None for what no agent should get."""
    author = message.author
    if (
        author.bot
        or author.id == own_id
        or message.webhook_id is not None
        or message.type not in TAKEN_TYPES
        or not message.content
    ):
        return None
    server = _guild_id(message)
    if server is not None and guild_id is not None and str(server) != guild_id:
        return None
    reference = message.reference
    return InboundMessage(
        provider=NAME,
        chat_id=str(message.channel.id),
        message_id=str(message.id),
        sender_id=str(author.id),
        sender_name=author.display_name,
        # Mentions read as "@Alice", not "<@4242>".
        text=message.clean_content,
        chat_type="dm" if server is None else "guild",
        reply_to=str(reference.message_id) if reference and reference.message_id else None,
    )


def _guild_id(message: discord.Message) -> int | None:
    if message.guild is not None:
        return message.guild.id
    # A server discord.py has not loaded yet: its channel still names it.
    guild_id: int | None = getattr(message.channel, "guild_id", None)
    return guild_id


class DiscordReceiver:
    def __init__(self, cfg: Config, sink: InboundSink) -> None:
        self._section = cfg.chat.discord
        self._cfg_channels = list(cfg.chat.channels)
        self._sink = sink
        self._queue: asyncio.Queue[discord.Message] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._client: _Bot | None = None
        self._backoff = RECONNECT_FIRST_S
        self._last_error: str | None = None
        # The newest message handled per channel: a new session reads on from there.
        self._newest: dict[int, int] = {}
        self._first_since = discord.utils.time_snowflake(utcnow() - CATCH_UP_WINDOW)
        self._held: list[discord.Message] | None = None  # live ones, while catching up
        self.status = LinkStatus("connecting")

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._run(), name="discord gateway"),
            asyncio.create_task(self._keep_messages(), name="discord messages"),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._client is not None:
            await self._client.close()

    def routes(self) -> list[Any]:
        return []

    # ---- connecting ------------------------------------------------------------------------------

    async def _run(self) -> None:
        """Connect; when discord.py gives up on a connection, say why and start a new one."""
        assert self._section.token is not None
        token = self._section.token.get_secret_value()
        while True:
            self._client = client = _Bot(self)
            try:
                await client.login(token)
                if self._section.base_url:
                    # discord.py goes straight to Discord's gateway; elsewhere, ask where it is.
                    _, url, _ = await client.http.get_bot_gateway()
                    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
                await client.connect(reconnect=True)
                error = "the Discord gateway ended the session"
            except discord.LoginFailure:
                self._set("failed", f"Discord refused the bot token: {TOKEN_FIX}")
                return
            except discord.PrivilegedIntentsRequired:
                self._set("failed", INTENT_FIX)
                return
            except discord.ConnectionClosed as exc:
                if exc.code == 4004:  # authentication failed
                    self._set("failed", f"Discord refused the bot token: {TOKEN_FIX}")
                    return
                error = f"Discord closed the gateway connection (code {exc.code}: {exc.reason})"
            except (discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError) as exc:
                error = self._last_error or f"could not reach Discord: {exc}"
            finally:
                await client.close()
            self._set("reconnecting", error)
            await asyncio.sleep(self._backoff)
            self._backoff = min(self._backoff * 2, RECONNECT_CAP_S)

    def _new_session(self, client: _Bot) -> None:
        self._connected()
        self._held = []
        self._tasks.append(asyncio.create_task(self._catch_up(client), name="discord catch-up"))

    async def _catch_up(self, client: _Bot) -> None:
        """Queue what the mapped channels received while no session was there, then what
        arrived live meanwhile (in that order: oldest first)."""
        missed: list[discord.Message] = []
        for channel_id in self._mapped_channels():
            after = discord.Object(self._newest.get(channel_id, self._first_since))
            try:
                # The channel itself, not a partial one: its messages must say which server.
                channel = client.get_channel(channel_id) or await client.fetch_channel(channel_id)
                if not isinstance(channel, discord.abc.Messageable):
                    continue
                history = channel.history(limit=CATCH_UP_LIMIT, after=after, oldest_first=True)
                missed.extend([m async for m in history])
            except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
                log.warning("discord: could not read what channel %s missed: %s", channel_id, exc)
        held, self._held = self._held or [], None
        seen: set[int] = set()
        for message in [*sorted(missed, key=lambda m: m.id), *held]:
            if message.id not in seen:
                seen.add(message.id)
                self._queue.put_nowait(message)

    def _mapped_channels(self) -> list[int]:
        prefix = f"{NAME}:"
        return [
            int(channel[len(prefix) :])
            for channel in self._cfg_channels
            if channel.startswith(prefix) and channel[len(prefix) :].isdigit()
        ]

    def _connected(self) -> None:
        self._last_error = None
        self._backoff = RECONNECT_FIRST_S
        self._set("connected")

    def _disconnected(self) -> None:
        # discord.py reconnects (and resumes) by itself; until then, say what went wrong.
        self._set("reconnecting", self._last_error or "lost the connection to the Discord gateway")

    def _request_failed(self, exc: BaseException) -> None:
        self._last_error = f"could not reach Discord: {exc}"

    def _set(self, state: LinkState, error: str | None = None) -> None:
        if state != self.status.state or error != self.status.error:
            if error:
                log.warning("discord %s: %s", state, error)
            self.status = LinkStatus(state, error, utcnow())

    # ---- receiving -------------------------------------------------------------------------------

    def _arrived(self, message: discord.Message) -> None:
        if self._held is not None:
            self._held.append(message)
        else:
            self._queue.put_nowait(message)

    async def _keep_messages(self) -> None:
        while True:
            message = await self._queue.get()
            channel_id = message.channel.id
            self._newest[channel_id] = max(self._newest.get(channel_id, 0), message.id)
            own = self._client.user if self._client is not None else None
            try:
                received = inbound(
                    message, own_id=own.id if own else None, guild_id=self._section.guild_id
                )
            except Exception:  # one odd message must not stop the ones behind it
                log.exception("discord: message %s in %s not understood", message.id, channel_id)
                continue
            if received is None:
                continue
            result = await self._accept(received)
            if result.reply:
                try:
                    await message.reply(result.reply, allowed_mentions=NO_MENTIONS)
                except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
                    # The message was handled; only the answer is lost.
                    log.warning("discord: could not answer %s: %s", received.channel_id, exc)

    async def _accept(self, received: InboundMessage) -> InboundResult:
        delay = RECONNECT_FIRST_S
        while True:
            try:
                return await self._sink.accept(received)
            except Exception:  # not kept, and Discord will not send it again: try until kept
                log.exception("discord: %s not kept; trying again", received.channel_id)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_CAP_S)


class _Bot(discord.Client):
    """The gateway client; its events go to the receiver."""

    def __init__(self, receiver: DiscordReceiver) -> None:
        trace = aiohttp.TraceConfig()
        trace.on_request_exception.append(self._request_failed)
        super().__init__(intents=intents(), max_messages=None, http_trace=trace)
        self._receiver = receiver
        use_endpoint(receiver._section)

    async def _request_failed(self, _: Any, __: SimpleNamespace, params: Any) -> None:
        # The reason a reconnect fails ("Cannot connect to host …"), for the status.
        self._receiver._request_failed(params.exception)

    async def on_ready(self) -> None:
        self._receiver._new_session(self)

    async def on_resumed(self) -> None:
        self._receiver._connected()

    async def on_disconnect(self) -> None:
        # A client given up on (closed) no longer speaks for the link: the receiver said why.
        if not self.is_closed():
            self._receiver._disconnected()

    async def on_message(self, message: discord.Message) -> None:
        # Synchronous: discord.py starts one task per event, in order; this keeps that order.
        self._receiver._arrived(message)


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


def receiver(cfg: Config, sink: InboundSink) -> DiscordReceiver:
    return DiscordReceiver(cfg, sink)


def sender(cfg: Config) -> DiscordSender:
    return DiscordSender(cfg)
