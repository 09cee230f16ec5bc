"""Sending to chat providers, as Temporal activities run by the outbox workflow.

The provider's credentials come from this worker's configuration when the activity runs; the
request carries only the chat, the text and ids. A provider's :class:`~agentcomms.transports.SendError`
becomes the ``ApplicationError`` type the retry policy branches on (names in :mod:`agentcomms.errors`).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentcomms import errors, transports
from agentcomms.config import Config
from agentcomms.transports import ProviderUnavailable, RateLimited, Sender, SendRefused
from workflows.outbox import ChatSend, ChatSent


class ChatActivities:
    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg
        # One client per provider for the worker's life: its connection pool is reused.
        self._senders: dict[str, Sender] = {}

    def _sender(self, provider: str) -> Sender:
        if provider in self._senders:
            return self._senders[provider]
        if not transports.is_provider(provider) or provider == "local":
            raise ApplicationError(
                f"no chat provider {provider!r} to send with; known: "
                + ", ".join(p for p in transports.PROVIDERS if p != "local"),
                type=errors.CHAT_NOT_CONFIGURED,
                non_retryable=True,
            )
        section = self._cfg.chat.provider(provider)
        if not section.enabled or section.missing_credentials():
            unset = ", ".join(f"chat.{provider}.{k}" for k in section.missing_credentials())
            fix = f"set {unset}" if section.enabled else f"set chat.{provider}.enabled to true"
            raise ApplicationError(
                f"{provider} is not configured on this worker: {fix}, then restart it",
                type=errors.CHAT_NOT_CONFIGURED,
                non_retryable=True,
            )
        try:
            sender = transports.load(provider).sender(self._cfg)
        except transports.NoTransport as exc:
            raise ApplicationError(
                str(exc), type=errors.CHAT_NOT_CONFIGURED, non_retryable=True
            ) from exc
        self._senders[provider] = sender
        return sender

    @activity.defn(name="send_chat")
    async def send_chat(self, req: ChatSend) -> ChatSent:
        """Send a text, or a receipt for the human's message, through the request's provider."""
        sender = self._sender(req.provider)
        try:
            if req.kind == "receipt":
                assert req.message_id is not None and req.stage is not None
                await sender.receipt(req.chat_id, req.message_id, req.stage, note=req.note)
                return ChatSent()
            return ChatSent(
                message_id=await sender.send_text(req.chat_id, req.text, reply_to=req.reply_to)
            )
        except RateLimited as exc:
            raise ApplicationError(
                str(exc),
                type=errors.CHAT_RATE_LIMITED,
                next_retry_delay=timedelta(seconds=max(exc.retry_after, 0.1)),
            ) from exc
        except ProviderUnavailable as exc:
            raise ApplicationError(str(exc), type=errors.CHAT_UNAVAILABLE) from exc
        except SendRefused as exc:
            raise ApplicationError(str(exc), type=errors.CHAT_REFUSED, non_retryable=True) from exc

    async def close(self) -> None:
        for sender in self._senders.values():
            await sender.close()
        self._senders.clear()
