"""Telegram, through python-telegram-bot: long polling by default, or a webhook.

Receiving: ``getUpdates`` is asked for what came after the last update handled, and an update
counts as handled only once the gateway kept it (posted to a mailbox, or rejected and recorded):
an update in flight when the gateway stops is delivered again by Telegram after a restart, and
its event id (derived from the chat and message id) makes it the same event. Updates are handled
side by side, each chat's in order, so a voice note being heard holds up only its own chat, never
the poll (see :mod:`agentcomms.transports._updates_in_hand`). In webhook mode,
Telegram posts each update to ``server.public_url`` + ``/webhooks/telegram`` with the secret
token in ``X-Telegram-Bot-Api-Secret-Token``; the answer is 200 only once the update was kept.

A voice note (``voice``, or an ``audio`` file) carries its file id; the gateway fetches it
(``getFile``, then the file URL under ``base_file_url``) only for a sender it lets in; so does a
photo (its largest size) or a document.

Sending: ``sendMessage`` (split at Telegram's 4096-character limit), ``sendDocument`` for an
agent's files, and ``setMessageReaction`` for receipts. Telegram's errors become :class:`~agentcomms.errors.SendError` subclasses.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import logging
import warnings
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputFile,
    Message,
    ReactionTypeEmoji,
    ReplyParameters,
    Update,
)
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning

from agentcomms.config import Config, TelegramConfig
from agentcomms.errors import (
    ChatProviderUnavailable,
    RateLimited,
    SendRefused,
)
from agentcomms.models import utcnow
from agentcomms.transports import (
    ButtonPress,
    InboundMessage,
    InboundSink,
    LinkStatus,
    ReceiptStage,
    typed_with_note,
)
from agentcomms.transports._telegram_files import attachment, seconds, voice_note
from agentcomms.transports._updates_in_hand import Item, UpdatesInHand

log = logging.getLogger(__name__)

NAME = "telegram"
WEBHOOK_PATH = "/webhooks/telegram"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
TELEGRAM_API = "https://api.telegram.org"
MAX_TEXT = 4096
POLL_TIMEOUT_S = 25
# While updates are in hand, how often the poll asks again (each answer is immediate then).
BUSY_POLL_S = 0.5
# Updates handled at once; newer ones wait in Telegram and are sent again.
MAX_IN_HAND = 100
RECONNECT_FIRST_S = 1.0
RECONNECT_CAP_S = 30.0
# Receipts, as reactions on the human's message (from the emoji Telegram allows for them).
RECEIPTS: dict[ReceiptStage, str] = {"queued": "👀", "typed": "✍"}
# The updates a bot needs: messages to it (and in groups it is in).
ALLOWED_UPDATES = ("message", "callback_query")


def make_bot(section: TelegramConfig, *, request: HTTPXRequest | None = None) -> Bot:
    """A Bot for ``section``: Telegram's API, or ``base_url`` (a local Bot API server, a proxy)."""
    assert section.token is not None
    base = (section.base_url or TELEGRAM_API).rstrip("/")
    return Bot(
        section.token.get_secret_value(),
        base_url=f"{base}/bot",
        base_file_url=f"{base}/file/bot",
        request=request or HTTPXRequest(connection_pool_size=4),
        # The receiver's long poll has a connection of its own: it must not hold up replies.
        get_updates_request=(
            HTTPXRequest(connection_pool_size=1, read_timeout=10) if request is None else request
        ),
    )


def retry_after_seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # an int today, a timedelta in a later major version
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value: Any = exc.retry_after
    return seconds(value)


def inbound(message: Message) -> InboundMessage | None:
    """The message as agentcomms sees it; None for what no agent should get (bots, nothing)."""
    user = message.from_user
    text = message.text or message.caption
    medium = message.voice or message.audio
    file = attachment(message)
    if user is None or user.is_bot or not (text or medium or file):
        return None
    return InboundMessage(
        provider=NAME,
        chat_id=str(message.chat.id),
        message_id=str(message.message_id),
        sender_id=str(user.id),
        sender_name=user.full_name or user.username or str(user.id),
        text=text or "",
        chat_type=message.chat.type,
        reply_to=str(message.reply_to_message.message_id) if message.reply_to_message else None,
        voice=voice_note(medium) if medium is not None and not message.text else None,
        attachment=file,
    )


def _chat_of(update: Update) -> int | None:
    """Whose order an update keeps: its chat's (updates of no chat need none)."""
    return update.message.chat.id if update.message is not None else None


class TelegramReceiver:
    def __init__(self, cfg: Config, sink: InboundSink) -> None:
        self._section = cfg.chat.telegram
        self._public_url = cfg.server.public_url
        self._sink = sink
        self._bot = make_bot(self._section)
        self._task: asyncio.Task[None] | None = None
        self._in_hand = UpdatesInHand(most=MAX_IN_HAND)
        self.status = LinkStatus("connecting")

    @property
    def webhook(self) -> bool:
        return self._section.mode == "webhook"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="telegram receiver")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(TelegramError):
            await self._bot.shutdown()

    def routes(self) -> list[BaseRoute]:
        return [Route(WEBHOOK_PATH, self._webhook, methods=["POST"])] if self.webhook else []

    # ---- connecting ------------------------------------------------------------------------------

    async def _run(self) -> None:
        """Connect, then poll (or set the webhook); on trouble, say so and reconnect with backoff."""
        backoff = RECONNECT_FIRST_S
        while True:
            try:
                async for _ in self._connected():
                    backoff = RECONNECT_FIRST_S  # each successful poll resets it
            except InvalidToken as exc:
                self._set(
                    "failed",
                    f"Telegram refused the bot token ({exc.message}); check "
                    "chat.telegram.token (from @BotFather)",
                )
                return
            except Conflict as exc:
                # Another process polls with this token, or a webhook is set elsewhere.
                self._set(
                    "reconnecting",
                    f"Telegram: {exc.message} (is another agentcomms "
                    "gateway or bot using this token?)",
                )
            except RetryAfter as exc:
                self._set("reconnecting", str(exc))
                backoff = max(backoff, retry_after_seconds(exc))
            except TelegramError as exc:
                self._set("reconnecting", f"Telegram: {exc.message}")
            except Exception as exc:  # e.g. Temporal did not take a message: poll it again
                log.exception("telegram receiver")
                self._set("reconnecting", f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RECONNECT_CAP_S)

    async def _connected(self) -> AsyncIterator[None]:
        """Connect; then yield after each successful poll (in webhook mode, return once set)."""
        await self._bot.initialize()  # getMe, once: checks the token
        if self.webhook:
            if not self._public_url:
                self._set(
                    "failed", "chat.telegram.mode is webhook but server.public_url is not set"
                )
                await asyncio.Event().wait()
            secret = self._section.webhook_secret
            await self._bot.set_webhook(
                url=f"{self._public_url}{WEBHOOK_PATH}",
                secret_token=secret.get_secret_value() if secret else None,
                allowed_updates=list(ALLOWED_UPDATES),
            )
            self._set("connected")
            return
        # getUpdates is refused while a webhook is set; pending updates are kept.
        await self._bot.delete_webhook(drop_pending_updates=False)
        self._set("connected")
        try:
            while True:
                updates = await self._bot.get_updates(
                    offset=self._in_hand.offset,
                    timeout=POLL_TIMEOUT_S,
                    allowed_updates=list(ALLOWED_UPDATES),
                )
                self._set("connected")
                yield
                self._in_hand.raise_failure()  # not kept: let go, and poll again from it
                new = self._in_hand.take(
                    Item(u.update_id, _chat_of(u), functools.partial(self._handle, u))
                    for u in updates
                )
                if self._in_hand.busy and (not new or self._in_hand.crowded):
                    # Telegram answers at once while an update is in hand (it sends it again),
                    # so the poll waits a moment, or until one is kept (or, with many in hand,
                    # until there is room for many), before asking again.
                    await self._in_hand.settle(BUSY_POLL_S)
        finally:
            await self._in_hand.let_go()

    def _set(self, state: Any, error: str | None = None) -> None:
        if state != self.status.state or error != self.status.error:
            if error:
                log.warning("telegram %s: %s", state, error)
            self.status = LinkStatus(state, error, utcnow())

    # ---- receiving -------------------------------------------------------------------------------

    async def _handle(self, update: Update) -> None:
        if update.callback_query is not None:
            await self._pressed(update)
            return
        message = update.message
        if message is None:
            return
        received = inbound(message)
        if received is None:
            return
        result = await self._sink.accept(received)
        if result.reply:
            try:
                await self._bot.send_message(
                    message.chat.id,
                    result.reply,
                    reply_parameters=ReplyParameters(
                        message.message_id, allow_sending_without_reply=True
                    ),
                )
            except TelegramError as exc:  # the message was handled; only the answer is lost
                log.warning("telegram: could not answer %s: %s", received.channel_id, exc)

    async def _pressed(self, update: Update) -> None:
        query = update.callback_query
        assert query is not None
        message = query.message
        chat = message.chat.id if message is not None else None
        if message is None or chat is None or not query.data:
            return
        markup = getattr(message, "reply_markup", None)
        keyboard = tuple(
            (button.text, button.callback_data)
            for row in (markup.inline_keyboard if markup is not None else ())
            for button in row
            if isinstance(button.callback_data, str)
        )
        sink = self._sink
        told = await sink.button(
            ButtonPress(
                provider="telegram",
                chat_id=str(chat),
                sender_id=str(query.from_user.id),
                sender_name=query.from_user.full_name,
                data=query.data,
                message_id=str(message.message_id),
                keyboard=keyboard,
            )
        )
        try:
            await self._bot.answer_callback_query(query.id, text=told[:200])
        except TelegramError as exc:  # the press was handled; only the toast is lost
            log.warning("telegram: could not answer a button press: %s", exc)

    async def _webhook(self, request: Request) -> Response:
        secret = self._section.webhook_secret
        given = request.headers.get(SECRET_HEADER, "")
        if secret is None or not hmac.compare_digest(
            given.encode(), secret.get_secret_value().encode()
        ):
            return PlainTextResponse(f"forbidden: bad or missing {SECRET_HEADER}", 403)
        try:
            update = Update.de_json(await request.json(), self._bot)
        except (ValueError, KeyError, TypeError):
            return PlainTextResponse("not a Telegram update", status_code=400)
        try:
            await self._handle(update)
        except Exception:  # not kept: Telegram retries a non-2xx answer
            log.exception("telegram webhook")
            return PlainTextResponse("not kept, send it again", status_code=503)
        return JSONResponse({"ok": True})


class TelegramSender:
    """Sends with a client of its own per call, closed after it: an activity holds no
    connection between sends, and a changed token is read at the next send."""

    max_chars = MAX_TEXT

    def __init__(self, cfg: Config) -> None:
        self._section = cfg.chat.telegram

    @contextlib.asynccontextmanager
    async def _bot(self) -> AsyncIterator[Bot]:
        request = HTTPXRequest(connection_pool_size=2)
        try:
            # No getMe first (Bot.initialize): a bad token shows as the send's own 401.
            yield make_bot(self._section, request=request)
        finally:
            await request.shutdown()

    async def send_text(self, chat_id: str, text: str, *, reply_to: str | None = None) -> str:
        async with self._bot() as bot:
            with telegram_errors(chat_id):
                sent = await bot.send_message(
                    chat_id,
                    text,
                    reply_parameters=(
                        ReplyParameters(int(reply_to), allow_sending_without_reply=True)
                        if reply_to and reply_to.isdigit()
                        else None
                    ),
                )
        return str(sent.message_id)

    async def send_file(
        self, chat_id: str, name: str, data: bytes, *, reply_to: str | None = None
    ) -> str:
        """A file as a document (sendDocument): the human gets it as it was, never recompressed
        as sendPhoto would."""
        async with self._bot() as bot:
            with telegram_errors(chat_id):
                sent = await bot.send_document(chat_id, InputFile(data, filename=name))
        return str(sent.message_id)

    async def send_buttons(self, chat_id: str, text: str, buttons: list[tuple[str, str]]) -> str:
        """`text` with one row of buttons, each (label, what a press sends back)."""
        keyboard = InlineKeyboardMarkup(
            [[InlineKeyboardButton(label, callback_data=data) for label, data in buttons]]
        )
        async with self._bot() as bot:
            with telegram_errors(chat_id):
                sent = await bot.send_message(chat_id, text[:MAX_TEXT], reply_markup=keyboard)
        return str(sent.message_id)

    async def edit_buttons(
        self, chat_id: str, message_id: str, buttons: list[tuple[str, str]]
    ) -> None:
        """Replace a message's row of buttons, its text kept."""
        keyboard = InlineKeyboardMarkup(
            [[InlineKeyboardButton(label, callback_data=data) for label, data in buttons]]
        )
        async with self._bot() as bot:
            with telegram_errors(chat_id):
                await bot.edit_message_reply_markup(chat_id, int(message_id), reply_markup=keyboard)

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """Replace a message's text; its buttons go."""
        async with self._bot() as bot:
            with telegram_errors(chat_id):
                await bot.edit_message_text(text[:MAX_TEXT], chat_id, int(message_id))

    async def receipt(
        self, chat_id: str, message_id: str, stage: ReceiptStage, *, note: str | None = None
    ) -> None:
        # A bot has one reaction per message: "typed" replaces "queued".
        async with self._bot() as bot:
            with telegram_errors(chat_id):
                await bot.set_message_reaction(
                    chat_id, int(message_id), reaction=[ReactionTypeEmoji(RECEIPTS[stage])]
                )
        if note:
            await self.send_text(chat_id, typed_with_note(note), reply_to=message_id)

    async def close(self) -> None:
        pass


@contextlib.contextmanager
def telegram_errors(chat_id: str) -> Any:
    """Telegram's errors as SendError: wait, retry with backoff, or fail with what to fix."""
    try:
        yield
    except RetryAfter as exc:
        raise RateLimited(f"Telegram: {exc.message}", retry_after_seconds(exc)) from exc
    except InvalidToken as exc:
        raise SendRefused(
            f"Telegram refused the bot token ({exc.message}): check chat.telegram.token"
        ) from exc
    except Forbidden as exc:
        raise SendRefused(
            f"Telegram does not let the bot write to chat {chat_id} ({exc.message}): the person "
            "must start a chat with the bot (or unblock it), or the bot must be added to the group"
        ) from exc
    except ChatMigrated as exc:
        raise SendRefused(
            f"Telegram chat {chat_id} became supergroup {exc.new_chat_id}: map "
            f"telegram:{exc.new_chat_id} in chat.channels and send there"
        ) from exc
    except BadRequest as exc:
        if "chat not found" in exc.message.lower():
            raise SendRefused(
                f"Telegram does not know chat {chat_id}: check the chat id (a person must "
                "message the bot first)"
            ) from exc
        raise SendRefused(f"Telegram refused the message to chat {chat_id}: {exc.message}") from exc
    except NetworkError as exc:  # also TimedOut and the provider's 5xx answers
        raise ChatProviderUnavailable(f"Telegram did not answer: {exc.message}") from exc
    except (Conflict, TelegramError) as exc:
        raise ChatProviderUnavailable(f"Telegram: {exc.message}") from exc


def receiver(cfg: Config, sink: InboundSink) -> TelegramReceiver:
    return TelegramReceiver(cfg, sink)


def sender(cfg: Config) -> TelegramSender:
    return TelegramSender(cfg)
