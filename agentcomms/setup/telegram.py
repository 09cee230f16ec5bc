"""Setting up Telegram: ``getMe`` checks the token, ``getUpdates`` hears the human (no gateway may
be polling the same bot meanwhile: Telegram gives a bot's updates to one reader), ``sendMessage``
sends the test message. What setup read is confirmed to Telegram when it ends, so the gateway,
started afterwards, does not type the setup's messages into the agent's pane."""

from __future__ import annotations

from collections.abc import AsyncIterator

from telegram import Bot as TelegramBot
from telegram.error import Conflict, InvalidToken, NetworkError, TelegramError
from telegram.request import HTTPXRequest

from agentcomms.config import Config, TelegramConfig
from agentcomms.errors import SendError, SetupFailed
from agentcomms.setup import Bot
from agentcomms.transports import InboundMessage
from agentcomms.transports.telegram import TELEGRAM_API, inbound, make_bot, telegram_errors

POLL_S = 10  # each getUpdates waits this long for a message at most


class TelegramSetup:
    def __init__(self, section: TelegramConfig) -> None:
        self._where = (section.base_url or TELEGRAM_API).rstrip("/")
        self._request = HTTPXRequest(connection_pool_size=2, read_timeout=POLL_S + 10)
        self._bot: TelegramBot = make_bot(section, request=self._request)
        self._next: int | None = None  # the offset that confirms what was read

    async def check(self) -> Bot:
        try:
            me = await self._bot.get_me()
        except InvalidToken as exc:
            raise SetupFailed(
                f"Telegram refused the token ({exc.message}): copy it again from @BotFather "
                "(/mybots, your bot, API Token) and run setup again"
            ) from None
        except TelegramError as exc:
            raise SetupFailed(self._unreachable(exc)) from None
        return Bot(
            name=f"@{me.username}",
            how_to_write=f"open https://t.me/{me.username} (or find @{me.username} in Telegram), "
            "press Start or write any message; in a group, add the bot and write there",
        )

    async def listen(self) -> None:
        pass  # Telegram keeps a bot's messages until they are read

    async def messages(self) -> AsyncIterator[InboundMessage]:
        while True:
            try:
                updates = await self._bot.get_updates(
                    offset=self._next, timeout=POLL_S, allowed_updates=["message"]
                )
            except Conflict as exc:
                raise SetupFailed(self._taken(exc)) from None
            except (NetworkError, TelegramError) as exc:
                raise SetupFailed(self._unreachable(exc)) from None
            for update in updates:
                self._next = update.update_id + 1
                found = inbound(update.message) if update.message else None
                if found is not None:
                    yield found

    async def send(self, chat_id: str, text: str) -> None:
        try:
            with telegram_errors(chat_id):
                await self._bot.send_message(chat_id, text)
        except SendError as exc:
            raise SetupFailed(str(exc)) from None

    async def close(self) -> None:
        try:
            if self._next is not None:  # confirm what was read: the gateway starts after it
                await self._bot.get_updates(offset=self._next, timeout=0)
        except TelegramError:
            pass  # the gateway then sees the setup's messages too: harmless, they are admitted
        finally:
            await self._request.shutdown()

    @staticmethod
    def _taken(exc: Conflict) -> str:
        if "webhook" in exc.message.lower():
            return (
                f"Telegram sends this bot's messages to a webhook ({exc.message}), and setup reads "
                "them by polling: remove the webhook with the Bot API's deleteWebhook (a gateway "
                "in webhook mode sets it again when it starts), then run setup again"
            )
        return (
            f"Telegram gives this bot's messages to someone else ({exc.message}): stop whatever "
            "else reads them (a gateway elsewhere with this bot's token) while setting up, then "
            "run setup again"
        )

    def _unreachable(self, exc: TelegramError) -> str:
        return (
            f"Telegram's Bot API at {self._where} did not answer as the Bot API does "
            f"({exc.message}): check your network, or chat.telegram.base_url (--base-url) if "
            "you use a Bot API server of your own or a proxy"
        )


def open_session(cfg: Config) -> TelegramSetup:
    return TelegramSetup(cfg.chat.telegram)
