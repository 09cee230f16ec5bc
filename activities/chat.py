"""Sending to chat providers, as Temporal activities run by the outbox workflow.

The provider's credentials come from this worker's configuration when the activity runs; the
request carries only the chat, the text and ids. A provider's :class:`~agentcomms.errors.SendError`
becomes the ``ApplicationError`` type the retry policy branches on (names in :mod:`agentcomms.errors`).

Only the deployment's items are sent: each carries the deployment's tag, bound to its outbox's
agent and chat, and the send checks it and takes what it sends from the item so checked (anyone
who reaches Temporal can signal an outbox, or schedule ``send_chat`` from a workflow of their
own). A genuine message the projection shows sent already is not sent again, and each item is
sent by one activity only, the first to ask (the projection records which): a copy signalled to
another outbox, or to one started afresh, while the original waits, or a receipt asked for twice,
sends nothing.

Temporal retries a failed send on its own, and its history keeps only the last failure: so each
failed try of a message is recorded here, with the provider's answer, in the message's event
(``agentcomms trace`` shows them).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import traceback
from datetime import timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentcomms import errors, transports
from agentcomms.config import Config
from agentcomms.errors import (
    ChatProviderUnavailable,
    NoTransport,
    RateLimited,
    SendError,
    SendRefused,
)
from agentcomms.logs import redact
from agentcomms.models import TRIES_KEPT, Try, utcnow
from agentcomms.outbox_models import ChatSend, ChatSent, FileRef, SendItem
from agentcomms.store import PROJECTION_UNAVAILABLE, Store
from agentcomms.transports import Sender
from agentcomms.trust import DeploymentKey

log = logging.getLogger(__name__)

# Recording a try is bookkeeping: a projection that hangs must not pile up writes.
RECORD_TRY_TIMEOUT_S = 10.0


class ChatActivities:
    def __init__(self, cfg: Config, key: DeploymentKey, store: Store | None = None) -> None:
        self._cfg = cfg
        self._key = key
        self._store = store
        # One client per provider for the worker's life: its connection pool is reused.
        self._senders: dict[str, Sender] = {}
        self._recording: set[asyncio.Task[None]] = set()

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
        except NoTransport as exc:
            raise ApplicationError(
                str(exc), type=errors.CHAT_NOT_CONFIGURED, non_retryable=True
            ) from exc
        self._senders[provider] = sender
        return sender

    @activity.defn(name="send_chat")
    async def send_chat(self, signed: SendItem) -> ChatSent:
        """Send a signed item of the outbox: a text, or a receipt for the human's message."""
        req = await self._checked(signed)
        attempt = activity.info().attempt
        try:
            sender = transports.as_agent(self._sender(req.provider), signed.agent_id)
            if req.kind == "receipt":
                assert req.message_id is not None and req.stage is not None
                await sender.receipt(req.chat_id, req.message_id, req.stage, note=req.note)
                return ChatSent(attempt=attempt)
            return ChatSent(message_id=await _send_resuming(sender, req), attempt=attempt)
        except ApplicationError as exc:  # ours, saying what to configure
            self._record_try(req, attempt, exc.message)
            raise
        except Exception as exc:
            answer = _answer(exc)
            self._record_try(req, attempt, answer)
            if not isinstance(exc, SendError):  # a fault of ours, maybe: its traceback, redacted
                trace = redact("".join(traceback.format_exception(exc)))
                log.warning("%s on %s failed: %s", req.kind, req.provider, trace)
            # Not chained: Temporal's history would keep the provider's own error, URL and all.
            raise _retry_decision(exc, answer) from None
        except asyncio.CancelledError:
            # Temporal ends a try that outlived its time limit: the provider never answered.
            limit = activity.info().start_to_close_timeout
            within = f" within {limit.total_seconds():.0f} s" if limit else ""
            self._record_try(req, attempt, f"no answer{within} (or the worker stopped)")
            raise

    async def _checked(self, signed: SendItem) -> ChatSend:
        """What to send, from an item the deployment signed for this outbox; refused otherwise."""
        item = signed.item
        if not self._key.outbox_item_is_genuine(signed.agent_id, signed.channel_id, item):
            activity.logger.warning(
                "refused to send %s to %s for %s: not signed by this deployment",
                item.id,
                signed.channel_id,
                signed.agent_id,
            )
            raise ApplicationError(
                f"{item.id} is not signed by this deployment: it did not come through "
                "agentcomms (or was altered since), so it was not sent",
                type=errors.NOT_SIGNED,
                non_retryable=True,
            )
        if item.event is not None and await self._sent_before(item.event.id):
            raise ApplicationError(
                f"{item.event.id} was sent already (a copy asked again?): not sent twice",
                type=errors.NOT_SIGNED,
                non_retryable=True,
            )
        if not await self._first_to_send(signed):
            raise ApplicationError(
                f"{item.id} was sent, or is being sent, by another run of an outbox (a copy "
                "signalled again?): not sent twice",
                type=errors.NOT_SIGNED,
                non_retryable=True,
            )
        if item.event is None:
            return item.send
        # A text's failed tries are recorded in its event.
        return item.send.model_copy(update={"event_id": item.event.id})

    async def _first_to_send(self, signed: SendItem) -> bool:
        """Whether this try may send the item: the first activity to ask for it (its own
        retries ask again). A genuine item copied from a history and signalled to an outbox of
        the attacker's, or to the outbox started afresh, while the original waits to be sent
        (or after a receipt went) finds it taken: nothing is sent twice."""
        if self._store is None:
            return True
        info = activity.info()
        me = f"{info.workflow_run_id}/{info.activity_id}"
        whose = hashlib.sha256(
            f"{signed.agent_id}\0{signed.channel_id}\0{signed.item.id}".encode()
        ).hexdigest()
        try:
            first = await self._store.spend("outbox-item", whose, me, utcnow())
        except PROJECTION_UNAVAILABLE as exc:
            # The outbox's own memory of ids still stands guard; a hiccup must not stop sends.
            log.warning("could not ask the projection about %s: %s", signed.item.id, exc)
            return True
        if first == me:
            return True
        activity.logger.warning(
            "refused to send %s to %s again: %s took it first",
            signed.item.id,
            signed.channel_id,
            first,
        )
        return False

    async def _sent_before(self, event_id: str) -> bool:
        if self._store is None:
            return False
        try:
            stored = await self._store.get_event(event_id)
        except PROJECTION_UNAVAILABLE as exc:
            log.warning("could not ask the projection about %s: %s", event_id, exc)
            return False
        return stored is not None and stored.status == "delivered"

    def _record_try(self, req: ChatSend, attempt: int, answer: str) -> None:
        """Record the failed try in the message's event, in the background: the failure goes
        back to Temporal (and the next try comes) without waiting for the projection."""
        if self._store is None or req.event_id is None:
            return
        failed = Try(at=utcnow(), error=answer)
        task = asyncio.create_task(self._append_try(req.event_id, failed, attempt))
        self._recording.add(task)
        task.add_done_callback(self._recording.discard)

    async def _append_try(self, event_id: str, failed: Try, attempt: int) -> None:
        assert self._store is not None
        try:
            async with asyncio.timeout(RECORD_TRY_TIMEOUT_S):
                await self._store.append_try(event_id, failed, attempt=attempt, keep=TRIES_KEPT)
        except Exception as exc:  # the send goes on; only trace's account of it is shorter
            log.warning("try %d of %s not recorded: %s", attempt, event_id, exc)

    async def close(self) -> None:
        for sender in self._senders.values():
            await sender.close()
        self._senders.clear()


async def _send_resuming(sender: Sender, req: ChatSend) -> str:
    """Send the text, then its files, each once across tries (see :func:`_send_text`); a file
    is sent only with the bytes the gateway checked. A provider whose message carries its
    files (an email) sends the text and its files as one message."""
    send_attached = getattr(sender, "send_attached", None)
    if req.files and send_attached is not None:
        files = [(ref.name, await asyncio.to_thread(read_checked, ref)) for ref in req.files]
        return str(await send_attached(req.chat_id, req.text, files, reply_to=req.reply_to))
    details = activity.info().heartbeat_details
    files_sent = int(details[2]) if len(details) == 3 else 0
    last_id = await _send_text(sender, req)
    if not req.files:
        return last_id
    send_file = getattr(sender, "send_file", None)
    if send_file is None:
        raise SendRefused(f"{req.provider} carries no files: the text went, the files did not")
    pieces = len(transports.split_text(req.text, sender.max_chars))
    for i, ref in enumerate(req.files):
        if i < files_sent:
            continue
        data = await asyncio.to_thread(read_checked, ref)
        last_id = str(await send_file(req.chat_id, ref.name, data, reply_to=req.reply_to))
        activity.heartbeat(pieces, last_id, i + 1)
    return last_id


def read_checked(ref: FileRef) -> bytes:
    """A file's bytes at send time, only if they are still those the gateway checked (a file
    changed or swapped for a link since is refused, not sent as it is now)."""
    try:
        fd = os.open(ref.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise SendRefused(f"{ref.name} is gone since it was sent ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as file:
        data = file.read(ref.size + 1)
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise SendRefused(f"{ref.name} changed after it was sent: not sent as it is now")
    return data


async def _send_text(sender: Sender, req: ChatSend) -> str:
    """Send a text longer than the provider takes as pieces, each once, across tries.

    Each piece sent is recorded as this activity's heartbeat (pieces sent, the last one's id),
    and Temporal hands the last heartbeat to the next try, which starts after it: when piece 3
    of 5 is refused (a 500, a 429), the retry sends pieces 3 to 5, not 1 and 2 again. The
    worker throttles heartbeats, but it hands the last one to the server before it reports the
    try as failed, so no heartbeat timeout is needed for that. What a try that timed out or a
    worker that died had sent since its last heartbeat reached the server may be sent again.
    """
    details = activity.info().heartbeat_details
    already_sent, last_id = (int(details[0]), str(details[1])) if len(details) >= 2 else (0, "")
    return await transports.send_pieces(
        sender,
        req.chat_id,
        req.text,
        reply_to=req.reply_to,
        already_sent=already_sent,
        last_id=last_id,
        on_sent=activity.heartbeat,
    )


def _answer(exc: BaseException) -> str:
    """What the provider answered, as kept in the projection and Temporal's history: a Bot API
    URL holds the bot's token, so none of it is kept."""
    return redact(str(exc) or type(exc).__name__)


def _retry_decision(exc: Exception, answer: str) -> ApplicationError:
    """The error Temporal's retry policy branches on; one it does not know is retried."""
    if isinstance(exc, RateLimited):
        return ApplicationError(
            answer,
            type=errors.CHAT_RATE_LIMITED,
            next_retry_delay=timedelta(seconds=max(exc.retry_after, 0.1)),
        )
    if isinstance(exc, ChatProviderUnavailable):
        return ApplicationError(answer, type=errors.CHAT_UNAVAILABLE)
    if isinstance(exc, SendRefused):
        return ApplicationError(answer, type=errors.CHAT_REFUSED, non_retryable=True)
    return ApplicationError(answer, type=type(exc).__name__)
