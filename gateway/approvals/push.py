"""An approval in a push notification (ntfy): the request, and a button per answer that the
phone presses by posting to the gateway's published URL (``server.public_url``), at
``/actions/ntfy/<token>``.

The token is the whole authority of a press, since a topic's subscribers are nobody the
gateway can tell apart. It is signed with a key of its own derived from the deployment's, for
one approval, one answer, the request it was shown with (its digest's start: a token left from
an earlier request that drew the same short id answers nothing) and the topic it went to, and
it expires (``chat.ntfy.action_ttl_s``). Each token answers once: its use is recorded in the
projection, so a press replayed (a copy of the URL, a proxy's log) is refused, also after a
restart. Changing any part of it breaks its tag. A press goes through the approvals' one
decide path (:meth:`gateway.approvals.methods.ApprovalMethods.decide`) like every other
surface's, so the first answer wins and every surface hears how it ended.

Without a published URL, or where the notification cannot show the request whole (a secret
hidden, too long), or where the agent's ``approvers`` do not list the topic (``ntfy:<topic>``),
the notification carries no button and says where to answer instead.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from agentcomms.approval_models import ApprovalRequest, ApprovalView, Behavior, Decision, chosen
from agentcomms.config import Config
from agentcomms.errors import RpcError
from agentcomms.models import utcnow
from agentcomms.store import Store
from agentcomms.transports import channel_id, first_part
from agentcomms.transports.ntfy import HIGH, Notification, PushButton
from agentcomms.trust import DeploymentKey
from gateway.approvals.words import (
    BUTTON_BEHAVIOR,
    OPTION_BUTTON,
    PUSH_REQUEST_CHARS,
    WHERE_WHOLE,
    asks,
    binding,
    hidden_on,
    said,
    shown_remotely,
    the_rest,
)
from workflows.approval.models import Decided

log = logging.getLogger(__name__)

ACTION_PATH = "/actions/ntfy"
TOKEN_VERSION = "n1"
SPENT_KIND = "ntfy-action"
TAGS = {"permission": ("warning",), "question": ("question",), "plan": ("clipboard",)}
# A permission's buttons, as `gateway.approvals.words.buttons` labels them for a chat.
PERMISSION_LABELS = {"a": "Allow", "s": "Allow for this session", "d": "Deny"}
PLAN_LABELS = {"a": "Approve", "d": "Keep planning"}
MAX_OPTIONS = 3  # ntfy shows three buttons: a question with more is answered elsewhere

Decide = Callable[[Decision], Awaitable[Decided | None]]
View = Callable[[str], Awaitable[ApprovalView | None]]


class ActionRefused(Exception):
    """A press that answers nothing: the message says why, for the phone's error toast."""

    def __init__(self, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Press:
    """What a token, once its tag checks out, stands for."""

    approval_id: str
    short: str  # a, s, d (as a chat's buttons) or oN (a question's option N)
    bound: str  # the start of the digest of the request it was shown with
    topic: str
    expires: int  # seconds since the epoch
    tag: str


class ActionTokens:
    """Mints and reads the tokens of a notification's buttons."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def mint(self, request: ApprovalRequest, topic: str, short: str, *, expires: datetime) -> str:
        nonce = secrets.token_urlsafe(9)
        fields = [
            TOKEN_VERSION,
            request.id,
            short,
            binding(request),
            topic,
            str(int(expires.timestamp())),
            nonce,
        ]
        return ".".join([*fields, self._tag(fields)])

    def read(self, token: str, *, now: datetime) -> Press:
        """The press `token` stands for; :class:`ActionRefused` when it was not ours as it is,
        or has expired."""
        parts = token.split(".")
        if len(parts) < 8 or parts[0] != TOKEN_VERSION:
            raise ActionRefused("not an agentcomms button: nothing changed")
        # The chat is the one field that may hold dots (an email address): the rest are fixed.
        fields = [*parts[:4], ".".join(parts[4:-3]), *parts[-3:-1]]
        tag = parts[-1]
        if not hmac.compare_digest(self._tag(fields), tag):
            raise ActionRefused("this button was not made by this deployment: nothing changed")
        _, approval_id, short, bound, topic, expires, _ = fields
        if not expires.isdigit() or int(expires) < now.timestamp():
            raise ActionRefused(f"this button of {approval_id} has expired: nothing changed")
        return Press(approval_id, short, bound, topic, int(expires), tag)

    def _tag(self, fields: list[str]) -> str:
        digest = hmac.new(self._key, "\0".join(fields).encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def tokens_for(key: DeploymentKey) -> ActionTokens:
    """The tokens signed with the deployment key's own key for them (the same after a restart
    and on every gateway of the deployment)."""
    return ActionTokens(key.derive("ntfy action tokens"))


def answers_offered(request: ApprovalRequest, most: int = MAX_OPTIONS) -> list[tuple[str, str]]:
    """The buttons a notification may carry, (label, short): none for a question it cannot
    show as buttons (several options to tick, or more than `most`)."""
    if request.ask == "question":
        if request.multi or len(request.options) > most:
            return []
        return [(o, f"{OPTION_BUTTON}{n}") for n, o in enumerate(request.options, 1)]
    if request.ask == "plan":
        return [(label, short) for short, label in PLAN_LABELS.items()]
    return [
        (label, short)
        for short, label in PERMISSION_LABELS.items()
        if short != "s" or request.suggestions
    ]


def not_here(cfg: Config, request: ApprovalRequest, topic: str) -> str | None:
    """Why a notification to `topic` carries no button for `request` (and where to answer
    instead); None when it carries them."""
    hidden = hidden_on(request, "ntfy")
    if hidden is not None:
        return hidden
    approvers = cfg.approvers(request.agent_id)
    if approvers is not None and channel_id("ntfy", topic) not in approvers:
        return (
            f"only {request.agent_id}'s approvers may answer {request.id}, and "
            f"ntfy:{topic} is not one: answer it with {WHERE_WHOLE}"
        )
    if cfg.server.public_url is None:
        return (
            f"the gateway has no published URL (server.public_url) for a button to reach: "
            f"answer {request.id} with {WHERE_WHOLE}, or in the agent's chats"
        )
    if not answers_offered(request):
        return (
            f"{request.id} has more options than a notification's three buttons, or takes "
            f"several: answer it with {WHERE_WHOLE}, or in the agent's chats"
        )
    return None


def notification(
    cfg: Config,
    tokens: ActionTokens,
    request: ApprovalRequest,
    topic: str,
    *,
    now: datetime | None = None,
) -> Notification:
    """The notification that shows `request` in `topic`, with a button per answer where it may
    carry them."""
    asked = asks(shown_remotely(request))
    shown = first_part(asked, PUSH_REQUEST_CHARS, the_rest(request))
    title = f"{request.agent_id}: approval {request.id}"
    tags = TAGS.get(request.ask, ())
    why_not = not_here(cfg, request, topic)
    if why_not is not None:
        message = f"{shown}\n\nNot to be answered here: {why_not}."
        return Notification(message=message, title=title, priority=HIGH, tags=tags)
    expires = (now or utcnow()) + timedelta(seconds=cfg.chat.ntfy.action_ttl_s)
    base = f"{cfg.server.public_url}{ACTION_PATH}"
    buttons = tuple(
        PushButton(label, f"{base}/{tokens.mint(request, topic, short, expires=expires)}")
        for label, short in answers_offered(request)
    )
    return Notification(
        message=f"{shown}\n\n(approval {request.id})",
        title=title,
        priority=HIGH,
        tags=tags,
        buttons=buttons,
    )


class OneTimeAnswers:
    """Answers that a one-time token alone authorises, through the one decide path: a
    notification's buttons (ntfy), an email's link to the console. Each token is checked
    (ours as it is, not expired, shown with this very request, to a chat of the approval's
    agent that may answer it) and spent once, before it decides."""

    def __init__(
        self,
        cfg: Config,
        tokens: ActionTokens,
        store: Store,
        view: View,
        decide: Decide,
        *,
        provider: str,
        spent_kind: str,
        why_not: Callable[[ApprovalRequest, str], str | None],
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._cfg = cfg
        self._tokens = tokens
        self._store = store
        self._view = view
        self._decide = decide
        self._provider = provider
        self._spent_kind = spent_kind
        self._why_not = why_not
        self._clock = clock

    async def check(self, token: str) -> tuple[Press, ApprovalView]:
        """What `token` answers, and the approval as it stands; :class:`ActionRefused` when it
        answers nothing (a press already made still checks out: spending it is the answer's)."""
        press = self._tokens.read(token, now=self._clock())
        view = await self._view(press.approval_id)
        if view is None:
            raise ActionRefused(f"no approval {press.approval_id} any more", 404)
        request = view.request
        if press.bound != binding(request):
            raise ActionRefused(
                f"this button was shown for an earlier request that had the id "
                f"{request.id}: it answers nothing of this one"
            )
        where = channel_id(self._provider, press.topic)
        why_not = self._why_not(request, press.topic)
        if self._cfg.chat.channels.get(where) != request.agent_id:
            why_not = f"{where} is not a chat of {request.agent_id} any more"
        if why_not is not None:
            raise ActionRefused(f"nothing changed: {why_not}")
        return press, view

    async def answer(self, token: str, short: str | None = None) -> str:
        """Answer the approval `token` stands for with its own answer (a button's), or `short`
        where the token only opens the choice (a link's): what the person is told."""
        press, view = await self.check(token)
        request = view.request
        behavior, answer = self._answer(request, short or press.short)
        # Once, before it decides: a copy of the URL used again answers nothing.
        attempt = uuid.uuid4().hex
        if await self._store.spend(self._spent_kind, press.tag, attempt, self._clock()) != attempt:
            raise ActionRefused(f"this button of {request.id} was pressed already", 409)
        decision = Decision(
            approval_id=request.id,
            behavior=behavior,
            answer=answer,
            by=channel_id(self._provider, press.topic),
            via=self._provider,
        )
        try:
            decided = await self._decide(decision)
        except RpcError as exc:
            raise ActionRefused(f"{request.id}: {exc.message}") from exc
        if decided is None:
            raise ActionRefused(f"no approval {request.id} any more", 404)
        if decided.accepted:
            return f"{request.id}: {said(decided.view)}"
        raise ActionRefused(f"{request.id} was answered already: {said(decided.view)}", 409)

    @staticmethod
    def _answer(request: ApprovalRequest, short: str) -> tuple[Behavior, str | None]:
        if short.startswith(OPTION_BUTTON) and request.ask == "question":
            number = short.removeprefix(OPTION_BUTTON)
            if number.isdigit() and 1 <= int(number) <= len(request.options):
                return "answer", chosen(request.options, number)
        elif short in BUTTON_BEHAVIOR and request.ask != "question":
            return BUTTON_BEHAVIOR[short], None
        raise ActionRefused(f"this button answers nothing of {request.id}")


class PushAnswers(OneTimeAnswers):
    """The route a notification's buttons post to: each token carries its answer."""

    def __init__(
        self,
        cfg: Config,
        tokens: ActionTokens,
        store: Store,
        view: View,
        decide: Decide,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        super().__init__(
            cfg,
            tokens,
            store,
            view,
            decide,
            provider="ntfy",
            spent_kind=SPENT_KIND,
            why_not=lambda request, topic: not_here(cfg, request, topic),
            clock=clock,
        )

    def routes(self) -> list[BaseRoute]:
        return [Route(f"{ACTION_PATH}/{{token}}", self._pressed, methods=["POST"])]

    async def _pressed(self, request: Request) -> Response:
        try:
            said_ = await self.press(request.path_params["token"])
        except ActionRefused as exc:
            log.info("ntfy: a press refused: %s", exc)  # anyone may knock: no warning each time
            return PlainTextResponse(str(exc), status_code=exc.status)
        return PlainTextResponse(said_)

    async def press(self, token: str) -> str:
        """Answer the approval a button's `token` stands for: what the phone is told."""
        return await self.answer(token)
