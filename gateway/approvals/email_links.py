"""An approval by email carries, beside its reply code, a one-time link to the console where the
console is published (``console.public_url``): ``/once/<token>`` opens a page of that approval
alone, its request and a button per answer, and a press answers it once.

The token is a notification button's (:class:`~gateway.approvals.push.ActionTokens`), signed
with a key of its own derived from the deployment's: for one approval, the request it was shown
with, the address it was sent to, and until it expires (``chat.email.link_ttl_s``). Opening the
page changes nothing (a mail scanner that follows every link answers nothing); a press spends
the token, recorded in the projection, so a link used again, or forwarded after use, answers
nothing, also after a restart. The answer goes through the one decide path
(:class:`~gateway.approvals.push.OneTimeAnswers`) as ``email:<address>``, so the agent's
``approvers`` and the first answer rule hold as for a reply. The page opens no console session:
the link is the authority for that one answer, never for the console's other pages.

Without a published console, where the email cannot show the request whole (a secret hidden),
where the agent's approvers do not list the address, or for a question of several options to
tick, the email carries no link, and its reply code stays the way to answer.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from html import escape
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from agentcomms.approval_models import ApprovalRequest
from agentcomms.config import Config
from agentcomms.models import utcnow
from agentcomms.store import Store
from agentcomms.transports import channel_id
from agentcomms.trust import DeploymentKey
from gateway.approvals.push import (
    ActionRefused,
    ActionTokens,
    Decide,
    OneTimeAnswers,
    View,
    answers_offered,
)
from gateway.approvals.words import asks, hidden_on, said, shown_remotely

log = logging.getLogger(__name__)

LINK_PATH = "/once"
LINKED = "email"  # the provider whose approvals carry a link
SPENT_KIND = "email-link"
# The token only opens the choice; the answer is the button pressed on the page.
OPENS = "o"
# A question's options shown as buttons on the page (a notification shows three).
MOST_OPTIONS = 12
# Where the page sits: only what the page itself needs, none of the console's script.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",  # the token is in the address
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}


def link_tokens(key: DeploymentKey) -> ActionTokens:
    """The links' tokens, under a key of their own: a notification's button opens no link."""
    return ActionTokens(key.derive("email console links"))


def no_link(cfg: Config, request: ApprovalRequest, address: str) -> str | None:
    """Why an email to `address` carries no link for `request`; None when it carries one."""
    if cfg.console.public_url is None or not cfg.console.enabled:
        return "the console is not published (console.public_url)"
    hidden = hidden_on(request, "email")
    if hidden is not None:
        return hidden
    approvers = cfg.approvers(request.agent_id)
    if approvers is not None and channel_id(LINKED, address) not in approvers:
        return f"email:{address} is not one of {request.agent_id}'s approvers"
    if not answers_offered(request, MOST_OPTIONS):
        return f"{request.id} takes several options, or more than {MOST_OPTIONS}"
    return None


def link(
    cfg: Config,
    tokens: ActionTokens,
    request: ApprovalRequest,
    address: str,
    *,
    now: datetime | None = None,
) -> str | None:
    """The one-time link that opens `request` in the published console, for the email to
    `address`; None where there is none (:func:`no_link`)."""
    if no_link(cfg, request, address) is not None:
        return None
    expires = (now or utcnow()) + timedelta(seconds=cfg.chat.email.link_ttl_s)
    token = tokens.mint(request, address, OPENS, expires=expires)
    return f"{cfg.console.public_url}{LINK_PATH}/{quote(token, safe='')}"


class EmailLinks(OneTimeAnswers):
    """The page a link opens, and the press that answers, on the console's listener."""

    def __init__(
        self, cfg: Config, tokens: ActionTokens, store: Store, view: View, decide: Decide
    ) -> None:
        super().__init__(
            cfg,
            tokens,
            store,
            view,
            decide,
            provider=LINKED,
            spent_kind=SPENT_KIND,
            why_not=lambda request, address: no_link(cfg, request, address),
        )

    def routes(self) -> list[BaseRoute]:
        return [Route(f"{LINK_PATH}/{{token}}", self._page, methods=["GET", "POST"])]

    async def _page(self, request: Request) -> Response:
        token = request.path_params["token"]
        try:
            if request.method == "POST":
                form = parse_qs((await request.body()).decode("utf-8", "replace"))
                chosen = (form.get("answer") or [""])[0]
                return _html(_told(await self.answer(token, chosen or "-")))
            _, view = await self.check(token)
        except ActionRefused as exc:
            log.info("email: a console link refused: %s", exc)  # anyone may knock
            return _html(_told(str(exc)), exc.status)
        if not view.open:
            return _html(_told(f"{view.request.id}: {said(view)}"))
        return _html(_choice(view.request))


def _html(body: str, status: int = 200) -> HTMLResponse:
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<title>agentcomms: an approval</title><link rel="stylesheet" href="/static/console.css">'
        f"</head><body><main>{body}</main></body></html>"
    )
    return HTMLResponse(page, status, headers=HEADERS)


def _told(words: str) -> str:
    return f"<p>{escape(words)}</p>"


def _choice(request: ApprovalRequest) -> str:
    """The request as the email showed it, and a button per answer, in one form."""
    buttons = "".join(
        f'<button type="submit" name="answer" value="{escape(short)}">{escape(label)}</button> '
        for label, short in answers_offered(request, MOST_OPTIONS)
    )
    return (
        f"<h1>{escape(request.agent_id)}: approval {escape(request.id)}</h1>"
        f"<pre>{escape(asks(shown_remotely(request)))}</pre>"
        f'<form method="post">{buttons}</form>'
        "<p>This link answers once.</p>"
    )
