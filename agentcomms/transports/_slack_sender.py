"""Slack's sending side, through slack_sdk's Web API client: messages (``chat.postMessage``, in the
thread of the human's message they answer), files (``files_upload_v2``), reactions for receipts,
and a message with Block Kit buttons (an approval's), updated in place once decided
(``chat.update``).

What Slack shows is what was sent: a message's text goes with Slack's markup off and ``&``, ``<``
and ``>`` escaped (so an agent's ``<!channel>`` pings no one and ``<url|words>`` shows no other
words than it holds), and a message with buttons shows its text in ``plain_text`` sections, which
Slack never reads as markup.

A message id here is Slack's ``ts``; a message inside a thread carries its thread's too
(``ts~thread_ts``), so an answer to it goes into that thread and a receipt onto the message.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from agentcomms.config import Config, SlackConfig
from agentcomms.errors import ChatProviderUnavailable, RateLimited, SendRefused
from agentcomms.transports import ReceiptStage, split_text, typed_with_note

SLACK_API = "https://slack.com/api/"
# A section block's text holds 3,000 characters; a longer text is several sections.
MAX_TEXT = 3000
MAX_SECTIONS = 45  # of Slack's 50 blocks a message may hold, the buttons' row kept
# Receipts, as reactions on the human's message; "typed" takes the place of "queued".
RECEIPTS: dict[ReceiptStage, str] = {"queued": "eyes", "typed": "writing_hand"}
THREAD_MARK = "~"
_TS = re.compile(r"[0-9]+\.[0-9]+")  # Slack's id of a message: seconds.sequence
TOKEN_FIX = (
    "check chat.slack.bot_token (your app at api.slack.com/apps, OAuth & Permissions, "
    "Bot User OAuth Token, xoxb-…)"
)
# Slack's errors that say the token itself is refused.
TOKEN_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
)
# Slack's errors that say it could not do it now, not that it never will.
PASSING_ERRORS = frozenset(
    {"fatal_error", "internal_error", "service_unavailable", "request_timeout"}
)
# Slack's answers to a receipt given twice (a retried activity): the reaction is as wanted.
SETTLED_REACTIONS = frozenset({"already_reacted", "no_reaction"})


def web_client(section: SlackConfig, token: str | None = None) -> AsyncWebClient:
    """A Web API client on ``base_url`` (or Slack), with the bot token unless told another."""
    if token is None:
        assert section.bot_token is not None
        token = section.bot_token.get_secret_value()
    return AsyncWebClient(token=token, base_url=section.base_url or SLACK_API)


def message_ref(ts: str, thread_ts: str | None = None) -> str:
    """A message's id as agentcomms keeps it: its ``ts``, and its thread's when it is a reply."""
    return ts if not thread_ts or thread_ts == ts else f"{ts}{THREAD_MARK}{thread_ts}"


def parse_ref(message_id: str) -> tuple[str, str]:
    """(the message's ``ts``, its thread's ``ts``: its own when it starts none)."""
    ts, _, thread = message_id.partition(THREAD_MARK)
    return ts, thread or ts


def thread_of(reply_to: str | None) -> str | None:
    """The thread an answer to `reply_to` goes into; None (the channel itself) for what is not
    a Slack message id (an agent's reply_to names a message of this chat, or nothing)."""
    if not reply_to:
        return None
    thread = parse_ref(reply_to)[1]
    return thread if _TS.fullmatch(thread) else None


def escaped(text: str) -> str:
    """`text` as Slack shows it character for character: its three control characters escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def sections(text: str) -> list[dict[str, Any]]:
    """`text` as ``plain_text`` section blocks (shown as written, emoji codes too)."""
    pieces = split_text(text, MAX_TEXT)[:MAX_SECTIONS]
    return [
        {"type": "section", "text": {"type": "plain_text", "text": piece or " ", "emoji": False}}
        for piece in pieces
    ]


def actions(buttons: list[tuple[str, str]]) -> dict[str, Any]:
    """One row of buttons, each (label, what a press sends back as its ``value``)."""
    return {
        "type": "actions",
        "block_id": "agentcomms",
        "elements": [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": label[:75], "emoji": False},
                # Unique in the message, as Slack wants; the value is what a press carries.
                "action_id": data[:255],
                "value": data,
            }
            for label, data in buttons
        ],
    }


class SlackSender:
    """Sends through one Web API client (slack_sdk opens a connection per request, so nothing
    is held between sends)."""

    max_chars = MAX_TEXT

    def __init__(self, cfg: Config) -> None:
        self._section = cfg.chat.slack
        self._client = web_client(self._section)

    async def send_text(self, chat_id: str, text: str, *, reply_to: str | None = None) -> str:
        thread = thread_of(reply_to)
        with slack_errors(chat_id):
            sent = await self._client.chat_postMessage(
                channel=chat_id,
                text=escaped(text),
                thread_ts=thread,
                mrkdwn=False,
                unfurl_links=False,
                unfurl_media=False,
            )
        return message_ref(str(sent["ts"]), thread)

    async def send_file(
        self, chat_id: str, name: str, data: bytes, *, reply_to: str | None = None
    ) -> str:
        """A file shared in the chat (in the thread the text before it went to), uploaded as
        Slack has it done: ``files.getUploadURLExternal``, the bytes to the URL it gives, then
        ``files.completeUploadExternal``. Its id is the file's: Slack shares it in the
        channel after answering, so the message's ``ts`` is not known yet."""
        with slack_errors(chat_id):
            try:
                done = await self._client.files_upload_v2(
                    channel=chat_id,
                    file=data,
                    filename=name,
                    title=name,
                    thread_ts=thread_of(reply_to),
                )
            except SlackRequestError as exc:  # the upload URL refused the bytes
                raise ChatProviderUnavailable(f"Slack did not take {name}: {exc}") from exc
        file = done.get("file") or {}
        return str(file.get("id") or "")

    async def send_buttons(self, chat_id: str, text: str, buttons: list[tuple[str, str]]) -> str:
        """`text` with one row of Block Kit buttons; a press reaches the gateway through
        Slack's interactivity (Socket Mode, or the interactivity URL)."""
        with slack_errors(chat_id):
            sent = await self._client.chat_postMessage(
                channel=chat_id,
                text=escaped(text[:MAX_TEXT]),  # what a notification shows
                blocks=[*sections(text), actions(buttons)],
                unfurl_links=False,
                unfurl_media=False,
            )
        return str(sent["ts"])

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """Replace a message's text; its buttons go."""
        ts, _ = parse_ref(message_id)
        with slack_errors(chat_id):
            await self._client.chat_update(
                channel=chat_id, ts=ts, text=escaped(text[:MAX_TEXT]), blocks=sections(text)
            )

    async def edit_buttons(
        self, chat_id: str, message_id: str, buttons: list[tuple[str, str]]
    ) -> None:
        """Replace a message's row of buttons, its text kept (read back from Slack: an update
        replaces every block, and the gateway that posted it may have restarted since)."""
        ts, _ = parse_ref(message_id)
        with slack_errors(chat_id):
            found = await self._client.conversations_history(
                channel=chat_id, latest=ts, inclusive=True, limit=1
            )
            messages = [m for m in found.get("messages") or [] if m.get("ts") == ts]
            if not messages:
                raise SendRefused(f"Slack has no message {ts} in {chat_id} to change any more")
            kept = [b for b in messages[0].get("blocks") or [] if b.get("type") != "actions"]
            await self._client.chat_update(
                channel=chat_id,
                ts=ts,
                text=messages[0].get("text", ""),
                blocks=[*kept, actions(buttons)],
            )

    async def tell(self, chat_id: str, user_id: str, text: str) -> None:
        """Words only `user_id` sees in `chat_id` (why a press was refused, or taken)."""
        with slack_errors(chat_id):
            await self._client.chat_postEphemeral(
                channel=chat_id, user=user_id, text=escaped(text), mrkdwn=False
            )

    async def receipt(
        self, chat_id: str, message_id: str, stage: ReceiptStage, *, note: str | None = None
    ) -> None:
        ts, _ = parse_ref(message_id)
        await self._react("reactions_add", chat_id, ts, RECEIPTS[stage])
        if stage == "typed":
            await self._react("reactions_remove", chat_id, ts, RECEIPTS["queued"])
        if note:  # a reaction cannot say what typing changed
            await self.send_text(chat_id, typed_with_note(note), reply_to=message_id)

    async def _react(self, method: str, chat_id: str, ts: str, name: str) -> None:
        with slack_errors(chat_id):
            try:
                await getattr(self._client, method)(channel=chat_id, timestamp=ts, name=name)
            except SlackApiError as exc:
                if exc.response.get("error") not in SETTLED_REACTIONS:
                    raise

    async def close(self) -> None:
        pass


@contextlib.contextmanager
def slack_errors(chat_id: str) -> Iterator[None]:
    """Slack's errors as SendError: wait, retry with backoff, or fail with what to fix."""
    try:
        yield
    except SlackApiError as exc:
        raise send_error(exc, chat_id) from exc
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise ChatProviderUnavailable(f"Slack did not answer: {exc or type(exc).__name__}") from exc


def send_error(exc: SlackApiError, chat_id: str) -> Exception:
    response = exc.response
    error = str(response.get("error") or "")
    if response.status_code == 429 or error == "ratelimited":
        wait = str(response.headers.get("Retry-After", "") or "")
        return RateLimited(f"Slack: rate limited ({error})", float(wait) if wait.isdigit() else 5.0)
    if error in TOKEN_ERRORS:
        return SendRefused(f"Slack refused the bot token ({error}): {TOKEN_FIX}")
    if error in ("channel_not_found", "not_in_channel", "is_archived"):
        return SendRefused(
            f"Slack does not let the bot write in {chat_id} ({error}): check the channel id "
            "(the channel's details, at the bottom) and invite the bot there (/invite @yourapp)"
        )
    if error == "missing_scope":
        needed = response.get("needed") or "a scope"
        return SendRefused(
            f"the Slack app lacks the {needed} scope: add it under OAuth & Permissions, "
            "reinstall the app, and put the new bot token in chat.slack.bot_token"
        )
    if response.status_code >= 500 or error in PASSING_ERRORS:
        return ChatProviderUnavailable(f"Slack answered {response.status_code}: {error}")
    return SendRefused(f"Slack refused the request for {chat_id}: {error}")
