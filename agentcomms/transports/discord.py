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

A press on one of the bot's buttons (an approval's Allow / Deny) arrives on the same connection
as an interaction (``INTERACTION_CREATE``). Discord forgets an interaction not acknowledged
within 3 s, so it is acknowledged first (deferred, with an answer only the presser sees), then
handed to the sink, whose answer then replaces the deferred one. A tick (a box of a question
that takes several options) is acknowledged instead as an update of the message itself: the
sink edits the message's buttons to show it, and the presser is told nothing more, so ticking
three boxes leaves no trail of replies; a tick that was not shown (a stranger's, one on a
question answered meanwhile) is explained to the presser alone in a followup. An interaction
that is not a press on one of this bot's own messages, for this bot's application, is refused
unanswered.

Sending: :mod:`agentcomms.transports._discord_sender`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket

from agentcomms.config import Config
from agentcomms.errors import AttachmentRefused
from agentcomms.models import utcnow
from agentcomms.transports import (
    Attachment,
    ButtonPress,
    InboundMessage,
    InboundResult,
    InboundSink,
    LinkState,
    LinkStatus,
    ShownInButtons,
)
from agentcomms.transports._discord_sender import (
    MAX_TEXT,
    NO_MENTIONS,
    TOKEN_FIX,
    DiscordSender,
    discord_errors,
    use_endpoint,
)

log = logging.getLogger(__name__)

# agentcomms never joins voice channels: discord.py's warning that voice libraries are missing
# would only send a reader of the gateway's log looking for them.
discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False

NAME = "discord"
RECONNECT_FIRST_S = 1.0
# How far back a gateway that starts reads its mapped channels for what it missed meanwhile.
CATCH_UP_WINDOW = timedelta(minutes=15)
CATCH_UP_LIMIT = 100  # messages per channel
RECONNECT_CAP_S = 60.0
TAKEN_TYPES = (discord.MessageType.default, discord.MessageType.reply)
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
        or not (message.content or message.attachments)
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
        attachment=attachment(message.attachments[0]) if message.attachments else None,
    )


def attachment(attached: discord.Attachment) -> Attachment:
    """A file of the message (its first: a human sends one at a time to an agent), fetched from
    Discord's CDN only when the gateway wants it."""

    async def fetch(max_bytes: int) -> bytes:
        if attached.size > max_bytes:
            raise AttachmentRefused(
                f"it is {attached.size / 1e6:.1f} MB, more than the {max_bytes / 1e6:.1f} MB "
                "a file may take"
            )
        try:
            return await attached.read()
        except (discord.NotFound, discord.Forbidden) as exc:  # gone, or no longer ours to read
            raise AttachmentRefused(f"Discord would not hand it over ({exc.status})") from exc

    image = (attached.content_type or "").startswith("image/")
    return Attachment(
        fetch=fetch,
        kind="photo" if image else "document",
        name=attached.filename,
        size=attached.size,
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

    async def _pressed(self, client: discord.Client, interaction: discord.Interaction) -> None:
        """A press on a button under one of the bot's messages: acknowledged at once, then
        decided by the sink, whose answer the presser alone sees (a tick's, only when the
        buttons do not show it)."""
        if interaction.type is not discord.InteractionType.component:
            return
        data: dict[str, Any] = dict(interaction.data or {})
        custom_id = data.get("custom_id")
        message = interaction.message
        own = client.user
        if (
            not isinstance(custom_id, str)
            or own is None
            or interaction.application_id != client.application_id
            or message is None
            or message.author.id != own.id
        ):
            log.warning(
                "discord: interaction %s is not a press on one of our messages: refused",
                interaction.id,
            )
            return
        sink = self._sink
        in_place = sink.in_place(custom_id)
        try:
            if in_place:  # a deferred update of the message: nothing appears in the channel
                await interaction.response.defer()
            else:
                await interaction.response.defer(ephemeral=True, thinking=True)
        except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            # Not acknowledged in time: Discord told the presser it failed, so nothing counts.
            log.warning("discord: a button press not acknowledged, so not taken: %s", exc)
            return
        press = ButtonPress(
            provider=NAME,
            chat_id=str(interaction.channel_id),
            sender_id=str(interaction.user.id),
            sender_name=interaction.user.display_name,
            data=custom_id,
            message_id=str(message.id),
            keyboard=tuple(
                (button.label or "", button.custom_id)
                for row in message.components
                for button in getattr(row, "children", [row])
                if isinstance(getattr(button, "custom_id", None), str)
            ),
        )
        try:
            told = await sink.button(press)
        except Exception:
            log.exception("discord: a button press in %s not taken", press.channel_id)
            told = "Your answer could not be recorded just now: press the button again."
        try:
            if not in_place:
                await interaction.edit_original_response(content=told[:MAX_TEXT])
            elif not isinstance(told, ShownInButtons):
                # The buttons do not show it (refused, answered meanwhile): why, privately.
                await interaction.followup.send(
                    told[:MAX_TEXT], ephemeral=True, allowed_mentions=NO_MENTIONS
                )
        except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            log.warning("discord: could not answer a button press: %s", exc)  # it was taken


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

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self._receiver._pressed(self, interaction)


__all__ = ["DiscordReceiver", "DiscordSender", "discord_errors", "receiver", "sender"]


def receiver(cfg: Config, sink: InboundSink) -> DiscordReceiver:
    return DiscordReceiver(cfg, sink)


def sender(cfg: Config) -> DiscordSender:
    return DiscordSender(cfg)
